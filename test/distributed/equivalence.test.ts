/**
 * Data-parallel equivalence: with plain SGD, N ranks at batch B each take the
 * same steps as one rank at batch N·B over the same examples, because the loss
 * is a mean and the ring averages the per-rank gradients. The experiment runs
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
  it(`N = 2 and 4 ranks at batch ${BATCH} reach the weights of one rank at batch N·${BATCH} after ${STEPS} steps`, () => {
    expect(existsSync(DENO), 'Deno is missing: run npm ci (it installs the deno package)').toBe(true);
    const run = spawnSync(DENO, ['run', '-A', 'test/distributed/equivalence-run.ts', String(STEPS), String(BATCH), '2', '4'], { encoding: 'utf8', timeout: 300_000 });
    expect(run.status, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout.trim().split('\n').pop()!) as { runtime: string; results: { size: number; steps: number[]; movedFromInitial: number; maxRelDiff: number; accuracies: number[] }[] };
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
  });
});
