/**
 * Robust aggregation on real workers: a 3-peer MLP job with
 * `aggregation: median` (then `centered-clip`), one Deno worker sending
 * sign-flipped gradients scaled by 20 (`--chaos scale:-20`, inside the guard's
 * 1,000× norm ratio: nobody names it). The rule outvotes or clips it: the job
 * finishes, the model learns, and every rank ends with the same weights. With
 * the mean the same fault diverges (bench/robust-aggregation.ts
 * measures every rule). The honest workers are started with
 * `--aggregation RULE`, which they check against the job's rule; a worker
 * whose rule is not the job's is refused before it joins a ring. Real server,
 * real Deno workers, real WebRTC (inside scripts/in-netns.sh).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { CHAOS_ENTRY, exitCodes, killStartedWorkers, requireNetns, startDenoWorker } from '../support/workers.ts';

afterAll(() => killStartedWorkers());

const STEPS = 20;
/** A worker starved of CPU on a loaded machine may fall a minute behind: the job waits rather than stops (one run here failed after 107 s). */
const PATIENT = { timeoutMs: 120_000, peerTimeoutMs: 120_000 };

describe('robust aggregation on real workers', () => {
  for (const rule of ['median', 'centered-clip']) {
    it(`${rule}: a worker sending -20x gradients from step 2 on does not wreck the model; the job finishes with identical weights everywhere`, async () => {
      requireNetns();
      const id = `robust-${rule}`;
      const job = {
        id,
        token: `${id}-token`,
        config: {
          model: 'mlp',
          optimizer: 'sgd',
          hyperparameters: {
            lr: 0.05,
            momentum: 0.9,
            seed: 11,
            steps: STEPS,
            aggregation: rule,
            evalLimit: 2000,
            ...PATIENT,
          },
          batchPerPeer: 32,
          minPeers: 3,
          maxPeers: 3,
        },
      };
      // A worker compiling kernels on a loaded CPU adapter misses heartbeats: a minute, as `run` allows.
      const server = await startServer({ jobs: [job], staticDir: null, missedHeartbeats: 12 });
      try {
        const workers = [
          startDenoWorker(server.url, job, ['--name', 'honest-0', '--aggregation', rule]),
          startDenoWorker(server.url, job, ['--name', 'honest-1', '--aggregation', rule]),
          startDenoWorker(server.url, job, ['--name', 'faulty', '--chaos', 'scale:-20@step:2'], CHAOS_ENTRY),
        ];
        const codes = await exitCodes(workers, 'the three workers to finish', 150_000);
        for (const [i, w] of workers.entries()) {
          expect(codes[i], w.stderr).toBe(0);
          expect(w.result, w.stderr).toMatchObject({ steps: STEPS, size: 3, stopped_by: null });
          // Nobody was named: the fault is inside the guard's ratio, the rule is what stops it.
          expect(w.events.filter((e) => e.event === 'peer-misbehaved')).toEqual([]);
        }
        // Replicas agree to the bit.
        const crcs = workers.map((w) => w.result!.weights_crc32);
        expect(typeof crcs[0]).toBe('number');
        expect(new Set(crcs).size, `weights CRC-32 by rank: ${crcs.join(', ')}`).toBe(1);
        // Chance is 10%; the mean under this fault fell to 8% and then diverged.
        expect(workers[0].result!.test_accuracy, `${rule}: test accuracy`).toBeGreaterThan(0.6);
      } finally {
        await server.close();
      }
    }, 180_000);
  }

  it('a worker started with --aggregation median is refused by a job that takes the mean, before it joins a ring', async () => {
    requireNetns();
    const job = {
      id: 'robust-refused',
      token: 'robust-refused-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, steps: 1 },
        batchPerPeer: 8,
        minPeers: 2,
        maxPeers: 2,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null, missedHeartbeats: 12 });
    try {
      const w = startDenoWorker(server.url, job, ['--name', 'picky', '--aggregation', 'median']);
      const [code] = await exitCodes([w], 'the worker to give up', 120_000);
      expect(code, w.stderr).not.toBe(0);
      expect(w.stderr).toMatch(
        /job robust-refused combines gradients by mean, but this worker was started with --aggregation median/,
      );
      expect(w.stderr).toContain('ERR_INVALID_ARGUMENT');
      expect(w.rank).toBeUndefined();
    } finally {
      await server.close();
    }
  }, 150_000);
});
