/**
 * Elastic training over real WebRTC: two Deno workers train; a third joins
 * mid-run and the ring re-forms to take it in (it starts at the others' step,
 * with their weights); then one worker is killed and the ring re-forms
 * without it; the survivors finish every step. The job's global batch (32) stays
 * fixed throughout: two peers take 16 each, three take 11, 11 and 10.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import {
  exitCodes,
  killStartedWorkers,
  lastStep as last,
  requireNetns,
  startDenoWorker,
  until,
} from '../support/workers.ts';

afterAll(killStartedWorkers);

describe('elastic training', () => {
  it('takes in a peer that joins mid-run and carries on without one that dies', async () => {
    requireNetns();
    const STEPS = 90;
    const job = {
      id: 'elastic',
      token: 'elastic-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, momentum: 0.9, seed: 5, steps: STEPS, elastic: true, globalBatch: 32 },
        batchPerPeer: 16,
        minPeers: 2,
        maxPeers: 4,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null });
    try {
      const a = startDenoWorker(server.url, job);
      const b = startDenoWorker(server.url, job);
      await until(() => [a, b].every((w) => last(w).step >= 5), 'two workers to take 5 steps', 120_000);

      const c = startDenoWorker(server.url, job);
      await until(() => c.steps.length >= 3, 'the newcomer to take 3 steps', 120_000);
      // The newcomer started where the ring was, in a ring of three.
      expect(c.steps[0].step).toBeGreaterThan(5);
      expect(c.steps[0].size).toBe(3);
      await until(() => [a, b].every((w) => last(w).size === 3), 'the old peers to see a ring of three', 30_000);

      // Kill the peer with rank 1 in the ring of three; the other two re-form and finish.
      const ring3 = [a, b, c];
      const victim = ring3.find((w) => last(w).rank === 1)!;
      const survivors = ring3.filter((w) => w !== victim);
      const stepAtKill = Math.max(...survivors.map((w) => last(w).step));
      victim.child.kill('SIGKILL');
      const codes = await exitCodes(survivors, 'the survivors to finish', 300_000);
      expect(codes, survivors.map((w) => w.stderr.slice(-2000)).join('\n---\n')).toEqual([0, 0]);
      for (const s of survivors) {
        expect(s.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
        expect(s.steps.some((x) => x.size === 2 && x.step > stepAtKill)).toBe(true);
        expect(s.result!.test_accuracy).toBeGreaterThan(0.5);
      }
      // Each step's share of the fixed global batch, by the ring's size then.
      const shares = (size: number) =>
        new Set(
          ring3.flatMap((w) => w.events.filter((e) => e.event === 'step' && e.size === size).map((e) => e.samples)),
        );
      expect([...shares(2)]).toEqual([16]);
      expect([...shares(3)].sort()).toEqual([10, 11]);
    } finally {
      await server.close();
    }
  }, 400_000);
});
