/**
 * Data-parallel equivalence: with plain SGD, N ranks at batch B each take the
 * same steps as one rank at batch N·B over the same examples, because the loss
 * is a mean and the ring averages the per-rank gradients. It holds for uneven
 * shares of a global batch too (each rank's gradient weighed by its share), as
 * `--balance speed` makes them when one rank is slow. The experiment runs
 * under Deno (equivalence-run.ts: real kernels on lavapipe, the real trainer
 * and ring-allreduce); this test judges its figures.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const DENO = 'node_modules/.bin/deno';
const STEPS = 30;
const BATCH = 8;

describe('data-parallel equivalence (plain SGD, real kernels, real ring-allreduce)', () => {
  it(`N = 2 and 4 ranks at batch ${BATCH}, and 3 at uneven shares of ${3 * BATCH + 1}, reach the weights of one rank at the global batch after ${STEPS} steps`, () => {
    expect(existsSync(DENO), 'Deno is missing: run npm ci (it installs the deno package)').toBe(true);
    const run = spawnSync(
      DENO,
      ['run', '-A', 'test/distributed/equivalence-run.ts', String(STEPS), String(BATCH), '2', '4'],
      { encoding: 'utf8', timeout: 300_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    type Result = { size: number; steps: number[]; movedFromInitial: number; maxRelDiff: number; accuracies: number[] };
    type Uneven = Omit<Result, 'size'> & { global: number; firstShares: number[]; lastShares: number[] };
    const report = JSON.parse(run.stdout.trim().split('\n').pop()!) as {
      runtime: string;
      results: Result[];
      uneven: Uneven;
    };
    expect(report.runtime).toBe('deno');
    expect(report.results.map((r) => r.size)).toEqual([2, 4]);
    for (const r of report.results) {
      expect(r.steps).toEqual(Array(r.size).fill(STEPS));
      // The weights moved (the comparison would pass vacuously on a model that never trains)…
      expect(r.movedFromInitial).toBeGreaterThan(0.05);
      // …and the ring's weights match the single big batch's.
      expect(r.maxRelDiff, `N=${r.size}`).toBeLessThanOrEqual(1e-3);
      // Evaluation is averaged over ranks, so every rank reports the same accuracy.
      expect(new Set(r.accuracies).size).toBe(1);
    }
    // 3 ranks sharing a global batch of 3·B+1 by speed, rank 1 slowed 4x: equal shares first, then the slow rank took
    // less (its own compute is 4x; the fast ranks' timings here share one process and one GPU queue, so only its share
    // is judged)…
    const u = report.uneven;
    expect(u.global).toBe(3 * BATCH + 1);
    expect(u.firstShares).toEqual([BATCH + 1, BATCH, BATCH]);
    expect(u.lastShares.reduce((a, b) => a + b, 0)).toBe(u.global);
    expect(u.lastShares[1], JSON.stringify(u)).toBeLessThan(BATCH);
    // …and the ring still took the steps of one rank at the global batch.
    expect(u.movedFromInitial).toBeGreaterThan(0.05);
    expect(u.maxRelDiff).toBeLessThanOrEqual(1e-3);
  });
});
