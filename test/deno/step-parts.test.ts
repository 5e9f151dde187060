/**
 * A step in parts under Deno (test/deno/run-step-parts.ts on lavapipe, where a GPU wait holds the
 * JavaScript thread until the queue is empty): the same losses and bucket gradients, bit for bit,
 * as one submit, and a timer scheduled before a step runs while the step is still being submitted
 * (it sees fewer submits than the step ends with), where with one submit it runs only after; an
 * evaluation in chunks, whose first wait holds the thread for one part; and
 * createModelInPieces, a worker's, starts from createModel's weights bit for bit.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

interface Run {
  losses: number[];
  buckets: number[];
  timerSaw: number[];
  after: number[];
  evaluation: number[];
  evaluationSubmits: { before: number; timerSaw: number; after: number };
}

describe('a step submitted in parts (deno)', () => {
  it('computes what one submit computes and lets timers run between its parts', () => {
    const run = spawnSync(deno, ['run', '-A', 'test/deno/run-step-parts.ts'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 200_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    expect(run.status, `deno exited with ${run.status}: ${run.stderr.slice(-2000)}`).toBe(0);
    const report = JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as Record<string, Run> & {
      initialWeightsAlike: boolean;
    };
    const { oneSubmit, parts } = report;
    // Three losses (two steps and the bucketed one) and every bucket's gradient, as f32 bits.
    expect(parts.losses).toHaveLength(3);
    expect(parts.losses).toEqual(oneSubmit.losses);
    expect(parts.buckets.length).toBeGreaterThan(1000);
    expect(parts.buckets).toEqual(oneSubmit.buckets);
    parts.timerSaw.forEach((saw, i) => {
      expect(saw, `step ${i}: the timer ran before the step's first part was submitted`).toBeGreaterThan(0);
      expect(saw, `step ${i}: the timer ran only once the whole step was submitted`).toBeLessThan(parts.after[i]);
    });
    // One submit: the step's read-back held the thread until the step was done.
    expect(oneSubmit.timerSaw).toEqual(oneSubmit.after);
    // An evaluation in chunks: the same metrics, and in parts the first wait held the thread for one
    // command buffer (a part of 0 ms), not for every chunk written before the last.
    expect(parts.evaluation).toEqual(oneSubmit.evaluation);
    const e = parts.evaluationSubmits;
    expect(e.after - e.before).toBeGreaterThan(2);
    expect(e.timerSaw - e.before, 'the timer waited for more than one part of the evaluation').toBe(1);
    // A worker's model (weights drawn in pieces, written after) starts from the constructor's weights.
    expect(report.initialWeightsAlike).toBe(true);
  }, 240_000);
});
