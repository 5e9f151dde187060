/**
 * The elastic session's regroup never waits without bound. Two Node peers
 * join an elastic job on a real server and open a real WebRTC ring; one sends
 * a false abort (naming a rank that never existed). The other's regroup finds
 * that no membership change follows within the server's liveness window and
 * fails with ERR_SIGNALING (the trainer then saves and stops) instead of
 * waiting forever for a membership that will not come.
 *
 * And a member that is still loading (data, kernels) when the others start
 * opening channels to it is waited for past the connect timeout: it has sent
 * no signal yet, so it is slow, not unreachable.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { init, type Session } from '../../src/distributed/session/session.node.ts';
import { epochAfter } from '../../src/distributed/session/ring-epoch.ts';
import { requireNetns } from '../support/workers.ts';

const sessions: Session[] = [];
let server: RunningServer | undefined;
afterAll(async () => {
  for (const s of sessions) await s.close('done');
  await server?.close();
});

describe('elastic session', () => {
  it('gives up a regroup with ERR_SIGNALING when a forged abort is followed by no membership change', async () => {
    requireNetns();
    const job = {
      id: 'forged',
      token: 'forged-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, elastic: true },
        batchPerPeer: 8,
        minPeers: 2,
        maxPeers: 2,
      },
    };
    // A short heartbeat keeps the liveness window (heartbeat × (missed + 2)) short for the test.
    server = await startServer({ jobs: [job], staticDir: null, heartbeatMs: 400 });
    const joining = [0, 1].map((i) =>
      init({ server: server!.url, job: job.id, token: job.token, name: `peer${i}`, onNotice: () => {} }),
    );
    sessions.push(...(await Promise.all(joining)));
    const [liar, honest] = sessions[0].rank === 0 ? sessions : [sessions[1], sessions[0]];

    liar.comm.abort(new RingtrainError(ErrorCode.PeerLost, 'rank 7 left (a lie)', { peer: 7 }));
    // The abort frame reaches the honest peer over the data channel.
    await expect.poll(() => honest.comm.error?.code, { timeout: 30_000 }).toBe(ErrorCode.PeerLost);

    const epochBefore = server.jobInfo('forged')!.epoch;
    const regroup = honest.elastic.regroup(epochAfter(honest.elastic.currentEpoch()));
    await expect(regroup).rejects.toMatchObject({
      code: ErrorCode.Signaling,
      message: expect.stringMatching(/no peer joined or left the job within 2 s/),
    });
    // Nobody left: the server's membership never moved.
    expect(server.jobInfo('forged')!.epoch).toBe(epochBefore);
  }, 120_000);

  it('waits past the connect timeout for a member that joined but is still loading', async () => {
    requireNetns();
    const job = {
      id: 'slow-loader',
      token: 'slow-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05 },
        batchPerPeer: 8,
        minPeers: 2,
        maxPeers: 2,
      },
    };
    const local = await startServer({ jobs: [job], staticDir: null });
    try {
      const opts = { server: local.url, job: job.id, token: job.token, connectTimeoutMs: 1000, onNotice: () => {} };
      // The stimulus: the second peer takes three connect timeouts to load before it can answer.
      const loading = (ms: number) => () => new Promise<void>((r) => setTimeout(r, ms));
      const joined = await Promise.all([
        init({ ...opts, name: 'quick' }),
        init({ ...opts, name: 'slow', beforeRing: loading(3000) }),
      ]);
      sessions.push(...joined);
      expect(joined.map((s) => s.size)).toEqual([2, 2]);
      expect(joined.map((s) => s.rank).sort()).toEqual([0, 1]);
    } finally {
      for (const s of sessions.splice(0)) await s.close('done');
      await local.close();
    }
  }, 120_000);
});
