/**
 * A job that is not elastic, broken by a forged abort: three Node peers join a fixed job on a real
 * server and open a real WebRTC ring; one aborts it saying another went away, which is a lie.
 * Each honest peer, after the server's liveness window in which nobody left, names the forger
 * (event peer-misbehaved, reported to the server) and gets the error the job stops with, naming
 * the forger instead of the peer it blamed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { init, type Session } from '../../src/distributed/session/session.node.ts';
import { requireNetns } from '../support/workers.ts';

const sessions: Session[] = [];
let server: RunningServer | undefined;
afterAll(async () => {
  for (const s of sessions) await s.close('done');
  await server?.close();
});

describe('fixed session', () => {
  it('names the rank whose abort said a peer went away when that peer is still in the job a liveness window later', async () => {
    requireNetns();
    const job = {
      id: 'forged-fixed',
      token: 'forged-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05 },
        batchPerPeer: 8,
        minPeers: 3,
        maxPeers: 3,
      },
    };
    // A short heartbeat keeps the liveness window (heartbeat × (missed + 2)) short for the test.
    server = await startServer({ jobs: [job], staticDir: null, heartbeatMs: 400 });
    const joining = [0, 1, 2].map((i) =>
      init({ server: server!.url, job: job.id, token: job.token, name: `peer${i}`, onNotice: () => {} }),
    );
    sessions.push(...(await Promise.all(joining)));
    const byRank = [...sessions].sort((a, b) => a.rank - b.rank);
    const [victim, honest, liar] = byRank;
    const seen = new Map<Session, RingEvent[]>(byRank.map((s) => [s, []]));
    for (const s of byRank) s.events.on((e) => seen.get(s)!.push(e));

    liar.comm.abort(new RingtrainError(ErrorCode.PeerLost, `rank ${victim.rank} left (a lie)`, { peer: victim.rank }));
    for (const s of [victim, honest])
      await expect.poll(() => s.comm.error?.code, { timeout: 30_000 }).toBe(ErrorCode.PeerLost);

    const verdicts = await Promise.all([victim, honest].map((s) => s.judgeLossClaims()));
    for (const [i, v] of verdicts.entries()) {
      expect(v, `rank ${i}`).toMatchObject({ code: ErrorCode.PeerMisbehaved, detail: { peer: liar.rank } });
      expect(v!.message).toMatch(
        new RegExp(
          `rank ${liar.rank} \\(peer\\d\\) aborted the ring saying a peer went away, but every peer it named was still in the job`,
        ),
      );
    }
    for (const s of [victim, honest])
      expect(seen.get(s)!.find((e) => e.type === 'peer-misbehaved')).toMatchObject({ peer: liar.rank });
    // Nobody left: the membership never moved.
    expect(server.jobInfo(job.id)!.size).toBe(3);
  }, 120_000);
});
