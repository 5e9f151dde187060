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
    server = await startServer({ staticDir: null, jobs: [jobSpec('ring', 'tr', SIZE, SIZE)] });
  });
  afterAll(async () => {
    for (const c of comms) c.close();
    for (const c of clients) await c.leave();
    await server.close();
  });

  it(`${SIZE} peers join, open data channels with the server's signals, and allreduce over them`, async () => {
    for (let i = 0; i < SIZE; i++) clients.push(await connect(server.url, { job: 'ring', token: 'tr', name: `peer${i}` }));
    const memberships = await Promise.all(clients.map((c) => c.waitForReady(30_000)));
    const epoch = memberships[0].epoch;
    expect(memberships.map((m) => m.epoch)).toEqual([epoch, epoch, epoch]);
    expect(memberships.map((m) => m.rank).sort()).toEqual([0, 1, 2]);

    const wrtc = loadWrtc();
    comms.push(
      ...(await Promise.all(
        clients.map((c, i) => joinWebRTCRing({ rank: memberships[i].rank, size: SIZE, signaler: c.signaler(epoch), wrtc, connectTimeoutMs: 60_000 })),
      )),
    );
    expect(server.jobInfo('ring')?.epoch).toBe(epoch);
    const n = 1000;
    const results = await Promise.all(
      comms.map((comm) => allreduce(comm, Float32Array.from({ length: n }, (_, j) => (comm.rank + 1) * j), { op: 'sum' })),
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
});
