/**
 * --precision f16-mixed end to end under Deno (test/deno/run-f16-mixed.ts on lavapipe, which has
 * 'shader-f16'; Node's SwiftShader does not, test/engine/loss-scale.test.ts checks the refusal
 * there): an injected overflow (a loss scale far too high) skips the step and is counted, the
 * weights stay as they were, S halves until the steps go through, and doubles after its clean steps;
 * a transformer's gradients with its activations kept as f16 (src/nn/f16-spill.ts), its head fused with
 * the loss and its step in micro-batches are f32's to f16 rounding; and its plan holds less than f32's.
 * In a ring (test/deno/run-f16-ring.ts): an overflow on one rank skips the step on every rank, and with
 * several backward passes a step, an overflow in any pass skips the whole step once; where the job lets
 * peers mix precisions, an f32 rank skips what an f16-mixed rank beside it overflowed.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const denoBin = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

interface Report {
  adapter: string;
  hasShaderF16: boolean;
  steps: { scale: number; scaleAfter: number; moved: boolean; loss: number }[];
  skipped: number;
  firstLoss: { f32: number; f16Mixed: number };
  mixedLayersGradError: number;
  transformer: {
    clean: boolean[];
    lossError: number;
    gradError: number;
    fusedGradError: number;
    fusedLossError: number;
    microGradError: number;
  };
  planBytes: { f32: number; f16Mixed: number };
}

interface RankRuns {
  skipped: number[][];
  scales: number[][];
  sameWeights: boolean;
  finite: boolean;
}

interface RingReport {
  buckets: RankRuns;
  whole: RankRuns;
  passes: RankRuns;
  passesPerStep: number;
  mixed: RankRuns[];
  clean: { skipped: number[]; weightError: number; differs: boolean };
}

/** Runs a Deno script to its end and returns the JSON of its last line. */
function runDeno(script: string): unknown {
  const run = spawnSync(denoBin, ['run', '-A', script], { cwd: root, encoding: 'utf8', timeout: 200_000 });
  expect(run.status, `deno exited with ${run.status}: ${run.stderr.slice(-2000)}`).toBe(0);
  return JSON.parse(run.stdout.trim().split('\n').pop() ?? '');
}

describe('f16-mixed training (deno)', () => {
  it('skips and counts an overflowed step, halves S, and grows it back after its clean steps', () => {
    const report = runDeno('test/deno/run-f16-mixed.ts') as Report;
    expect(report.hasShaderF16, `${report.adapter} should offer shader-f16 (lavapipe does)`).toBe(true);
    const { steps } = report;
    // The injected overflow: the first step is skipped, its weights untouched.
    expect(steps[0].moved).toBe(false);
    let clean = 0;
    steps.forEach((s, i) => {
      const what = `step ${i}: ${JSON.stringify(s)}`;
      expect(Number.isFinite(s.loss), what).toBe(true);
      if (!s.moved) {
        clean = 0;
        expect(s.scaleAfter, what).toBe(s.scale / 2);
        return;
      }
      clean = (clean + 1) % 3;
      expect(s.scaleAfter, what).toBe(clean === 0 ? s.scale * 2 : s.scale);
    });
    expect(report.skipped).toBe(steps.filter((s) => !s.moved).length);
    // S grew back at least once after it settled, and training went on.
    expect(steps.some((s) => s.moved && s.scaleAfter === 2 * s.scale)).toBe(true);
    expect(steps.filter((s) => s.moved).length).toBeGreaterThan(steps.length / 2);
    // The same weights in f16-mixed give f32's loss to f16 operand rounding.
    expect(Math.abs(report.firstLoss.f16Mixed - report.firstLoss.f32)).toBeLessThan(2e-3 * report.firstLoss.f32);
    expect(report.firstLoss.f16Mixed).not.toBe(report.firstLoss.f32);
    // One layer past the binding limit stays f32 beside an f16 one: the gradients are f32's to f16 rounding.
    expect(report.mixedLayersGradError).toBeLessThan(1e-2);
    expect(report.mixedLayersGradError).toBeGreaterThan(0);
    // A transformer's activations kept as f16 through the step, its head fused with the loss, and its step in
    // micro-batches: f32's gradients to f16 rounding (seen 1.6e-4 to 2.9e-4), the unsplit step's to f16 rounding
    // of differently scaled gradients (4.1e-4), no overflow at S = 2^10.
    const t = report.transformer;
    expect(t.clean).toEqual([true, true, true]);
    expect(t.lossError).toBeLessThan(1e-3);
    expect(t.fusedLossError).toBeLessThan(1e-3);
    for (const err of [t.gradError, t.fusedGradError, t.microGradError]) {
      expect(err, JSON.stringify(t)).toBeLessThan(2e-3);
      expect(err).toBeGreaterThan(0);
    }
    // The saved activations are f16 at backward's start: 8 layers plan well under f32's step (seen 0.65×).
    expect(report.planBytes.f16Mixed, JSON.stringify(report.planBytes)).toBeLessThan(0.75 * report.planBytes.f32);
  }, 240_000);

  it('in a ring: a step that overflows on one rank is skipped by every rank, and the ring sums true gradients', () => {
    const ring = runDeno('test/deno/run-f16-ring.ts') as RingReport;
    for (const r of [ring.buckets, ring.whole, ring.passes]) {
      const what = JSON.stringify(r);
      // The poisoned example falls to one rank in the steps that draw it: both ranks skip those, and only those.
      expect(r.skipped[0].length, what).toBeGreaterThan(0);
      expect(r.skipped[1], what).toEqual(r.skipped[0]);
      expect(r.scales[1], what).toEqual(r.scales[0]);
      expect(r.sameWeights, what).toBe(true);
      expect(r.finite, what).toBe(true);
    }
    expectWholeStepsSkipped(ring);
    expectMixedRingSkipsAlike(ring);
    // A clean f16-mixed ring ends at the f32 ring's weights to f16 rounding (seen 3.1e-3): its sums are unscaled.
    expect(ring.clean.skipped).toEqual([]);
    expect(ring.clean.weightError).toBeLessThan(2e-2);
    expect(ring.clean.differs).toBe(true);
  }, 240_000);
});

/**
 * Two passes a step draw the examples the one-pass ring drew (the same positions), so the example past f16's
 * range falls in the same passes. A step is skipped once, at its last pass, whichever pass drew it (its
 * passes' sum dropped, not carried into the next step, whose passes stay aligned), and S is the same over a
 * step's passes and halves once per skipped step.
 */
function expectWholeStepsSkipped({ whole, passes, passesPerStep: k }: RingReport): void {
  const what = JSON.stringify({ whole, passes });
  const poisoned = whole.skipped[0];
  // The case this needs: an overflow in a step's first pass, and one in a last pass with steps after it.
  expect(
    poisoned.some((p) => p % k !== 0),
    what,
  ).toBe(true);
  expect(
    poisoned.some((p) => p % k === 0 && p < passes.scales[0].length),
    what,
  ).toBe(true);
  expect(passes.skipped[0], what).toEqual([...new Set(poisoned.map((p) => Math.ceil(p / k) * k))]);
  const scales = passes.scales[0];
  for (let end = k; end <= scales.length; end += k) {
    const step = scales.slice(end - k, end);
    expect(step, what).toEqual(step.map(() => step[0]));
    if (end < scales.length) expect(scales[end], what).toBe(passes.skipped[0].includes(end) ? step[0] / 2 : step[0]);
  }
}

/**
 * f32 beside f16-mixed (the job allows it), one run each way round. Up to the first step that draws the example
 * past f16's range the two runs train alike; that step overflows in the run whose f16-mixed rank drew it, and
 * only there (the f32 rank takes it: its update may push later steps of the f16-mixed rank past f16's range too).
 * Both ranks of a run skip alike, the f32 rank at S = 1, and end at the same weights.
 */
function expectMixedRingSkipsAlike({ mixed, whole }: RingReport): void {
  const what = JSON.stringify({ mixed, whole: whole.skipped });
  const first = whole.skipped[0][0];
  expect(mixed.filter((r) => r.skipped[0].includes(first)).length, what).toBe(1);
  mixed.forEach((r, i) => {
    expect(r.skipped[1], what).toEqual(r.skipped[0]);
    expect(r.sameWeights, what).toBe(true);
    expect(r.finite, what).toBe(true);
    expect(Math.min(...r.skipped[0]), what).toBeGreaterThanOrEqual(first);
    // Run 0 is [f32, f16-mixed], run 1 [f16-mixed, f32]: S stays 1 on the f32 rank, halves at each skip on the other.
    const [f32, f16] = i === 0 ? [r.scales[0], r.scales[1]] : [r.scales[1], r.scales[0]];
    expect(f32, what).toEqual(f32.map(() => 1));
    f16
      .slice(1)
      .forEach((s, step) => expect(s, what).toBe(r.skipped[0].includes(step + 1) ? f16[step] / 2 : f16[step]));
  });
}
