import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { isRingtrainError, ErrorCode, type RingtrainError } from '../../src/core/errors.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import { connect as connectBrowserStyle } from '../../src/signaling/client.ts';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import { PROTOCOL_VERSION } from '../../src/signaling/protocol.ts';
import { jobSpec } from '../server/helpers.ts';

function listening(wss: WebSocketServer): Promise<WebSocketServer> {
  return new Promise((resolve) => wss.once('listening', () => resolve(wss)));
}

async function refusal(p: Promise<unknown>): Promise<RingtrainError> {
  try {
    await p;
  } catch (e) {
    if (isRingtrainError(e)) return e;
    throw e;
  }
  throw new Error('expected the promise to reject');
}

describe('signaling client (Node, over ws)', () => {
  let server: RunningServer;
  const clients: SignalingClient[] = [];
  beforeEach(async () => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('alpha', 'ta', 2, 2)] });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.leave();
    await server.close();
  });
  const join = async (name: string, events?: EventBus) => {
    const c = await connect(server.url, { job: 'alpha', token: 'ta', name, events });
    clients.push(c);
    return c;
  };

  it('joins, gets the job config and membership, and waits until the job is ready', async () => {
    const bus = new EventBus();
    const seen: RingEvent[] = [];
    bus.on((e) => seen.push(e));
    const a = await join('a', bus);
    expect(a.job).toMatchObject({ id: 'alpha', config: { model: 'mlp', batchPerPeer: 32, minPeers: 2 } });
    expect(a.membership).toMatchObject({ epoch: 1, rank: 0, size: 1, ready: false });
    const ready = a.waitForReady();
    const b = await join('b');
    expect(await ready).toMatchObject({ epoch: 2, rank: 0, size: 2, ready: true, ring: [0, 1] });
    expect(b.rank).toBe(1);
    expect(seen.filter((e) => e.type === 'membership').map((e) => (e as { epoch: number }).epoch)).toEqual([1, 2]);
  });

  it('gives a Signaler per epoch that reaches the other rank, and replays signals to late subscribers', async () => {
    const a = await join('a');
    const b = await join('b');
    const m = await a.waitForReady();
    await b.waitForReady();
    a.signaler(m.epoch).send(1, { type: 'offer', sdp: 'x' });
    a.signaler(m.epoch).send(1, { candidate: 'y' });
    // b subscribes only now; the first signal may already have arrived.
    const got: [number, unknown][] = [];
    const off = b.signaler(m.epoch).onSignal((from, data) => got.push([from, data]));
    await new Promise<void>((resolve) => {
      const check = setInterval(() => got.length >= 2 && (clearInterval(check), resolve()), 5);
    });
    expect(got).toEqual([
      [0, { type: 'offer', sdp: 'x' }],
      [0, { candidate: 'y' }],
    ]);
    off();
    expect(() => a.signaler(m.epoch).send(-1, {})).toThrow(/rank/);
    expect(() => a.signaler(m.epoch).send(1, undefined)).toThrow(/null or undefined/);
  });

  it('drops sends for an epoch that is over and says the peer left', async () => {
    const a = await join('a');
    const b = await join('b');
    const m = await a.waitForReady();
    const old = a.signaler(m.epoch);
    const left = new Promise((resolve) => a.on('peer-left', resolve));
    await b.leave('bye');
    clients.splice(clients.indexOf(b), 1);
    expect(await left).toMatchObject({ rank: 1, reason: 'left', detail: 'bye', name: 'b' });
    await a.nextMembership((x) => x.epoch === m.epoch + 1);
    old.send(1, { late: true });
    expect(a.staleSignalsDropped).toBe(1);
    expect(a.membership).toMatchObject({ size: 1, ready: false, started: true });
  });

  it('reports progress to the server', async () => {
    const a = await join('a');
    a.reportProgress({ step: 7, loss: 1.25, allreduceBytes: 100 });
    for (let i = 0; i < 500 && !server.jobInfo('alpha')?.peers[0].progress; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(server.jobInfo('alpha')?.peers[0].progress).toMatchObject({ step: 7, loss: 1.25, allreduceBytes: 100 });
  });

  it('fails with clear Signaling errors: wrong token, full job, no server, no WebSocket', async () => {
    const wrong = await refusal(connect(server.url, { job: 'alpha', token: 'nope' }));
    expect(wrong.code).toBe(ErrorCode.Signaling);
    expect(wrong.detail).toMatchObject({ code: 'bad-token' });
    expect(wrong.message).toMatch(/wrong token/);

    await join('a');
    await join('b');
    const full = await refusal(connect(server.url, { job: 'alpha', token: 'ta' }));
    expect(full.detail).toMatchObject({ code: 'job-full' });

    const { port } = server;
    const gone = await startServer({ staticDir: null });
    const deadUrl = gone.url;
    await gone.close();
    const unreachable = await refusal(connect(deadUrl, { job: 'alpha', token: 'ta', timeoutMs: 5000 }));
    expect(unreachable.code).toBe(ErrorCode.Signaling);
    expect(unreachable.message).toMatch(/cannot reach|no answer/);
    expect(port).toBeGreaterThan(0);

    // Node 20 has no global WebSocket: the runtime-neutral connect says where to look.
    const g = globalThis as { WebSocket?: unknown };
    const saved = g.WebSocket;
    delete g.WebSocket;
    try {
      expect(() => connectBrowserStyle(server.url, { job: 'alpha', token: 'ta' })).toThrow(/client\.node\.ts/);
    } finally {
      if (saved) g.WebSocket = saved;
    }
    expect(() => connect('ftp://x', { job: 'a', token: 'b' })).toThrow(/http\(s\) or ws\(s\)/);
  });

  it('notices a server that goes silent without closing, and rejects a server that speaks another protocol', async () => {
    // A stand-in server that welcomes, sends one membership, and then says nothing more.
    const mute = await listening(new WebSocketServer({ host: '127.0.0.1', port: 0 }));
    const { port } = mute.address() as AddressInfo;
    mute.on('connection', (ws) =>
      ws.on('message', () => {
        const config = {
          model: 'mlp',
          optimizer: 'sgd',
          hyperparameters: {},
          batchPerPeer: 1,
          minPeers: 1,
          maxPeers: 1,
        };
        ws.send(
          JSON.stringify({
            type: 'welcome',
            protocol: PROTOCOL_VERSION,
            peerId: 'p',
            job: { id: 'alpha', config },
            heartbeatMs: 50,
            missedHeartbeats: 2,
          }),
        );
        const peers = [{ rank: 0, peerId: 'p', runtime: 'node' }];
        ws.send(
          JSON.stringify({
            type: 'membership',
            epoch: 1,
            peers,
            ring: [0],
            you: 0,
            size: 1,
            ready: true,
            started: true,
            change: { kind: 'join', peerId: 'p' },
          }),
        );
      }),
    );
    try {
      const c = await connect(`ws://127.0.0.1:${port}/ws`, { job: 'alpha', token: 'ta' });
      const err = await new Promise<RingtrainError | null>((resolve) => c.on('close', resolve));
      expect(err?.code).toBe(ErrorCode.Signaling);
      expect(err?.message).toMatch(/went silent/);
    } finally {
      for (const ws of mute.clients) ws.terminate();
      await new Promise((r) => mute.close(r));
    }

    const alien = await listening(new WebSocketServer({ host: '127.0.0.1', port: 0 }));
    alien.on('connection', (ws) => ws.on('message', () => ws.send(JSON.stringify({ hello: 'world' }))));
    try {
      const e = await refusal(
        connect(`ws://127.0.0.1:${(alien.address() as AddressInfo).port}/ws`, { job: 'alpha', token: 'ta' }),
      );
      expect(e.message).toMatch(/does not understand/);
    } finally {
      for (const ws of alien.clients) ws.terminate();
      await new Promise((r) => alien.close(r));
    }
  });

  it('tells the client when the server goes away', async () => {
    const a = await join('a');
    const closed = new Promise<RingtrainError | null>((resolve) => a.on('close', resolve));
    await server.close();
    const err = await closed;
    expect(err?.code).toBe(ErrorCode.Signaling);
    expect(err?.detail).toMatchObject({ code: 'server-closing' });
    expect(a.closed).toBe(true);
    server = await startServer({ staticDir: null });
  });
});
