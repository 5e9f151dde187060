import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { allreduce } from '../../src/collectives/index.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { joinWebRTCRing } from '../../src/comm/rings.ts';
import { loadWrtc } from '../../src/comm/wrtc.node.ts';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import { jobSpec } from '../server/helpers.ts';

const SIZE = 3;

describe('WebRTC ring set up through the signaling server (Node, @roamhq/wrtc)', () => {
  let server: RunningServer;
  const clients: SignalingClient[] = [];
  const comms: Communicator[] = [];
  beforeAll(async () => {
    server = await startServer({
      staticDir: null,
      jobs: [jobSpec('ring', 'tr', SIZE, SIZE), jobSpec('elastic', 'te', 2, 3)],
    });
  });
  afterAll(async () => {
    for (const c of comms) c.close();
    for (const c of clients) await c.leave();
    await server.close();
  });

  it(`${SIZE} peers join, open data channels with the server's signals, and allreduce over them`, async () => {
    for (let i = 0; i < SIZE; i++)
      clients.push(await connect(server.url, { job: 'ring', token: 'tr', name: `peer${i}` }));
    const memberships = await Promise.all(clients.map((c) => c.waitForReady(30_000)));
    const epoch = memberships[0].epoch;
    expect(memberships.map((m) => m.epoch)).toEqual([epoch, epoch, epoch]);
    expect(memberships.map((m) => m.rank).sort()).toEqual([0, 1, 2]);

    const wrtc = loadWrtc();
    comms.push(
      ...(await Promise.all(
        clients.map((c, i) =>
          joinWebRTCRing({
            rank: memberships[i].rank,
            size: SIZE,
            signaler: c.signaler(epoch),
            wrtc,
            connectTimeoutMs: 60_000,
          }),
        ),
      )),
    );
    expect(server.jobInfo('ring')?.epoch).toBe(epoch);
    const n = 1000;
    const results = await Promise.all(
      comms.map((comm) =>
        allreduce(
          comm,
          Float32Array.from({ length: n }, (_, j) => (comm.rank + 1) * j),
          { op: 'sum' },
        ),
      ),
    );
    for (const r of results) {
      for (const j of [0, 1, 499, 999]) expect(r[j]).toBe(6 * j);
    }
    expect(comms.every((c) => c.stats.bytesSent > 0)).toBe(true);
    const metrics = await server.metricsText();
    const relayed = Number(/ringtrain_signals_relayed\{job="ring"\} (\d+)/.exec(metrics)?.[1]);
    // Three links, each at least an offer and an answer.
    expect(relayed).toBeGreaterThanOrEqual(6);
  });

  it('membership epochs let the ring re-form: one peer leaves, the rest rebuild; a newcomer joins the next epoch', async () => {
    const wrtc = loadWrtc();
    const sumOfRanks = async (members: SignalingClient[], epoch: number): Promise<number[]> => {
      const ring = await Promise.all(
        members.map((c) =>
          joinWebRTCRing({
            rank: c.rank,
            size: members.length,
            signaler: c.signaler(epoch),
            wrtc,
            connectTimeoutMs: 60_000,
          }),
        ),
      );
      comms.push(...ring);
      const out = await Promise.all(
        ring.map((comm) => allreduce(comm, Float32Array.of(comm.rank + 1, 1), { op: 'sum' })),
      );
      for (const comm of ring) comm.close();
      return out.map((r) => r[0] * 100 + r[1]);
    };
    const peers: SignalingClient[] = [];
    for (let i = 0; i < 3; i++) peers.push(await connect(server.url, { job: 'elastic', token: 'te', name: `e${i}` }));
    clients.push(...peers);
    const first = await Promise.all(peers.map((c) => c.nextMembership((m) => m.size === 3)));
    expect(await sumOfRanks(peers, first[0].epoch)).toEqual([603, 603, 603]);

    // Rank 1 leaves: the others see it go and get a new epoch with ranks 0 and 1.
    const gone = peers[1];
    const told = new Promise((resolve) => peers[0].on('peer-left', resolve));
    await gone.leave('enough');
    expect(await told).toMatchObject({ rank: 1, name: 'e1', reason: 'left' });
    const rest = [peers[0], peers[2]];
    const second = await Promise.all(rest.map((c) => c.nextMembership((m) => m.size === 2)));
    expect(second.map((m) => m.epoch)).toEqual([first[0].epoch + 1, first[0].epoch + 1]);
    expect(rest.map((c) => c.rank)).toEqual([0, 1]);
    expect(await sumOfRanks(rest, second[0].epoch)).toEqual([302, 302]);

    // A newcomer joins the running job; everyone moves to the next epoch together.
    const newcomer = await connect(server.url, { job: 'elastic', token: 'te', name: 'e3' });
    clients.push(newcomer);
    const all = [...rest, newcomer];
    const third = await Promise.all(all.map((c) => c.nextMembership((m) => m.size === 3)));
    expect(third.map((m) => m.epoch)).toEqual(Array(3).fill(second[0].epoch + 1));
    expect(newcomer.membership).toMatchObject({ rank: 2, started: true });
    expect(await sumOfRanks(all, third[0].epoch)).toEqual([603, 603, 603]);
  });
});
