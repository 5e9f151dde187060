/**
 * The mesh picks each pair's transport: TCP where both ends listen and the
 * dial works, WebRTC for a peer that does not listen (a page) and for a pair
 * whose dial fails. In one process over loopback, inside scripts/in-netns.sh.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LinkCommunicator } from '../../src/comm/communicator.ts';
import type { Link } from '../../src/comm/link.ts';
import { connectLinks } from '../../src/comm/mesh.ts';
import { MemoryStore, StoreSignaler } from '../../src/comm/store.ts';
import type { TcpEndpoint } from '../../src/comm/tcp-endpoint.ts';
import { makeLinkCertificate } from '../../src/comm/link-cert.node.ts';
import { TcpLinkEndpoint } from '../../src/comm/tcp-link.node.ts';
import { loadWrtc } from '../../src/comm/wrtc.node.ts';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function listener(tls = false): Promise<TcpLinkEndpoint> {
  const e = await TcpLinkEndpoint.listen({
    host: '127.0.0.1',
    port: 0,
    log: () => {},
    tls: tls ? makeLinkCertificate() : undefined,
  });
  cleanup.push(() => e.close());
  return e;
}

/** A port nothing listens on: a dial there is refused at once. */
async function deadAddress(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return `127.0.0.1:${port}`;
}

/** Opens the mesh on every rank at once; `endpoints[r]` undefined: rank r does not listen (as a page). */
async function mesh(endpoints: (TcpEndpoint | undefined)[]): Promise<Map<number, Link>[]> {
  const store = new MemoryStore();
  const key = randomBytes(32);
  const size = endpoints.length;
  const notices: string[] = [];
  const meshes = await Promise.all(
    endpoints.map((endpoint, rank) => {
      const signaler = new StoreSignaler(store, rank, size, 2);
      cleanup.push(() => signaler.close());
      return connectLinks({
        rank,
        size,
        signaler,
        wrtc: loadWrtc(),
        timeoutMs: 30_000,
        tcp: endpoint && { endpoint, job: 'mesh-test', epoch: 1, key },
        onNotice: (l) => notices.push(l),
      });
    }),
  );
  for (const m of meshes) for (const l of m.values()) cleanup.push(() => l.close());
  return meshes;
}

/** Every rank sends its number to every other over communicators on the mesh, and checks what came. */
async function exchange(meshes: Map<number, Link>[]): Promise<void> {
  const comms = meshes.map((links, rank) => new LinkCommunicator(rank, meshes.length, links, { peerTimeoutMs: 0 }));
  const tag = { id: 0, step: 0, chunk: 0 };
  await Promise.all(
    comms.flatMap((c) =>
      comms
        .filter((o) => o !== c)
        .flatMap((o) => [
          c.send(o.rank, tag, new Uint8Array([c.rank, 7])),
          c.recv(o.rank, tag).then((m) => expect([...m]).toEqual([o.rank, 7])),
        ]),
    ),
  );
  await Promise.all(comms.map((c) => c.close()));
}

const transports = (meshes: Map<number, Link>[]) =>
  meshes.map((m) => [...m].sort(([a], [b]) => a - b).map(([, l]) => l.transport));

describe("the mesh chooses each pair's transport", () => {
  it('runs in the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh').toBe('1');
  });

  it('TCP between the listeners, WebRTC to a peer that does not listen', async () => {
    const meshes = await mesh([await listener(), await listener(), undefined]);
    expect(transports(meshes)).toEqual([
      ['tcp', 'webrtc'],
      ['tcp', 'webrtc'],
      ['webrtc', 'webrtc'],
    ]);
    await exchange(meshes);
  });

  it('falls back to WebRTC, on both ends, when the dial to an advertised address fails', async () => {
    const real = await listener();
    // Rank 1 advertises an address where nobody listens; rank 0's dial is refused.
    const unreachable: TcpEndpoint = {
      address: await deadAddress(),
      dial: (...a) => real.dial(...a),
      accept: (...a) => real.accept(...a),
    };
    const meshes = await mesh([await listener(), unreachable, await listener()]);
    expect(transports(meshes)).toEqual([
      ['webrtc', 'tcp'],
      ['webrtc', 'tcp'],
      ['tcp', 'tcp'],
    ]);
    await exchange(meshes);
  });

  it('TLS between two --link-tls peers; WebRTC where only one end serves TLS', async () => {
    const meshes = await mesh([await listener(true), await listener(true), await listener()]);
    expect(transports(meshes)).toEqual([
      ['tls', 'webrtc'],
      ['tls', 'webrtc'],
      ['webrtc', 'webrtc'],
    ]);
    await exchange(meshes);
  });
});
