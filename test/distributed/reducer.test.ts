/**
 * The GradientReducer (src/distributed/reduce/) on the memory transport with a
 * CPU model: its overlap plan and the reason it keeps a gradient whole, the
 * sum of backward passes, what it keeps between steps (centered clip's
 * reference, int8's residual) and when it lets go of it, and the checks'
 * hold on the update. Gradients are small integers, so every sum and mean
 * below is exact in float32 and compared bit for bit.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { bucketBytesFor, DEFAULT_BUCKET_BYTES } from '../../src/engine/grad-buckets.ts';
import { GradientAccumulator } from '../../src/distributed/reduce/accumulator.ts';
import type { GradientCheck } from '../../src/distributed/reduce/gradient-check.ts';
import { GradientReducer, type ReducedModel } from '../../src/distributed/reduce/gradient-reducer.ts';
import { planOverlap, type OverlapInputs } from '../../src/distributed/reduce/overlap-plan.ts';
import type { GradientReducerOptions } from '../../src/distributed/reduce/settings.ts';
import { StepClock } from '../../src/distributed/train/step-clock.ts';

const N = 24;

/** A model whose gradients are whatever the test put in `grads` (two tensors, so the finite check names one). */
function cpuModel(): ReducedModel & { grads: Float32Array } {
  const grads = new Float32Array(N);
  return {
    grads,
    flatLength: N,
    layout: [
      { name: 'w', shape: [16], offset: 0, length: 16 },
      { name: 'b', shape: [8], offset: 16, length: 8 },
    ],
    readGrads: async () => grads.slice(),
  } as ReducedModel & { grads: Float32Array };
}

/** Rank r's gradient at pass p: small integers that differ per rank, pass and position. */
const gradOf = (rank: number, pass: number) =>
  Float32Array.from({ length: N }, (_, i) => ((i * 7 + rank * 3 + pass * 5) % 11) - 5);

interface Rank {
  reducer: GradientReducer;
  model: ReturnType<typeof cpuModel>;
  /** Every gradient handed to the update, copied. */
  updates: Float32Array[];
}

/** Every ring a test made, closed after it. */
const opened: Communicator[] = [];
afterEach(() => opened.splice(0).forEach((c) => c.close()));

function ring(size: number, options: (rank: number) => GradientReducerOptions = () => ({})): Rank[] {
  const comms = createMemoryRing(size);
  opened.push(...comms);
  return comms.map((comm, r) => {
    const model = cpuModel();
    return { reducer: new GradientReducer(comm, model, options(r)), model, updates: [] };
  });
}

/** One pass on every rank with `grads(rank)`: each rank's reduction, started. */
function start(ranks: Rank[], grads: (rank: number) => Float32Array, step: number, weight: (r: number) => number) {
  return ranks.map((k, r) => {
    k.model.grads.set(grads(r));
    return k.reducer.reduce({ weight: weight(r), step }, (g) => void k.updates.push(g.slice()));
  });
}

/** One pass on every rank; resolves to each rank's StepResult. */
const pass = (ranks: Rank[], grads: (rank: number) => Float32Array, step = 0, weight = (_r: number) => 1) =>
  Promise.all(start(ranks, grads, step, weight));

/** One pass on every rank, waiting for every rank however each ends. */
const settle = (ranks: Rank[], grads: (rank: number) => Float32Array) =>
  Promise.allSettled(start(ranks, grads, 0, () => 1));

const mean = (arrays: Float32Array[]) =>
  Float32Array.from({ length: N }, (_, i) => arrays.reduce((s, a) => s + a[i], 0) / arrays.length);

const base: OverlapInputs = {
  overlap: true,
  aggregation: undefined,
  backwardPassesPerStep: 1,
  compression: 'none',
  observes: false,
  changesForAll: false,
  fusionThresholdBytes: 64 << 20,
  flatLength: N,
};

describe('the overlap plan', () => {
  it('overlaps a plain job at the bucket size of its gradient, and says why each other job reads its gradient whole', () => {
    expect(planOverlap(base)).toEqual({ bucketBytes: DEFAULT_BUCKET_BYTES, wholeBecause: '' });
    const big = 100_000_000;
    expect(planOverlap({ ...base, flatLength: big }).bucketBytes).toBe(bucketBytesFor(big * 4, 64 << 20));
    expect(planOverlap({ ...base, compression: 'fp16' }).bucketBytes).toBe(DEFAULT_BUCKET_BYTES);
    const whole: [Partial<OverlapInputs>, RegExp][] = [
      [{ overlap: false }, /turned the overlap off/],
      [{ aggregation: { rule: 'median', trim: 0 } }, /robust aggregation/],
      [{ backwardPassesPerStep: 2 }, /backward passes are summed/],
      [{ compression: 'int8' }, /residual/],
      [{ compression: 'topk:0.1' }, /residual/],
      [{ observes: true }, /observes the ring chunks/],
      [{ changesForAll: true }, /factors every rank must know/],
      [{ fusionThresholdBytes: 2 }, /holds no float/],
    ];
    for (const [change, why] of whole) {
      const plan = planOverlap({ ...base, ...change });
      expect(plan.bucketBytes).toBeUndefined();
      expect(plan.wholeBecause).toMatch(why);
    }
    // The first rule that applies is the one given.
    expect(planOverlap({ ...base, overlap: false, compression: 'int8' }).wholeBecause).toMatch(
      /turned the overlap off/,
    );
  });

  it('a reducer decides it once from its checks: one that sets factors for every rank keeps the gradient whole, a rank-local one does not', () => {
    const [comm] = createMemoryRing(1);
    const plain = new GradientReducer(comm, cpuModel());
    expect(plain.bucketBytes).toBe(DEFAULT_BUCKET_BYTES);
    const doubt: GradientCheck = { before: () => 1 };
    expect(new GradientReducer(comm, cpuModel(), { checks: [doubt] }).plan.wholeBecause).toMatch(/factors/);
    const transform: GradientCheck = { rankLocal: true, before: () => {} };
    expect(new GradientReducer(comm, cpuModel(), { checks: [transform] }).bucketBytes).toBe(DEFAULT_BUCKET_BYTES);
    const observer: GradientCheck = { readsOnly: true, observe: () => {} };
    expect(new GradientReducer(comm, cpuModel(), { checks: [observer] }).plan.wholeBecause).toMatch(/observes/);
    comm.close();
  });
});

describe('GradientReducer, 2 ranks', () => {
  it('sums k backward passes and hands over their mean over the ring once, on the k-th; then starts again from zero', async () => {
    const ranks = ring(2, () => ({ backwardPassesPerStep: 2 }));
    for (let step = 0; step < 2; step++) {
      const first = await pass(ranks, (r) => gradOf(r, 2 * step), step);
      expect(first.map((x) => x.applied)).toEqual([false, false]);
      expect(ranks[0].updates.length).toBe(step);
      const second = await pass(ranks, (r) => gradOf(r, 2 * step + 1), step);
      expect(second.map((x) => x.applied)).toEqual([true, true]);
      expect(second[0].bytesSent).toBeGreaterThan(0);
      const all = [0, 1].flatMap((r) => [gradOf(r, 2 * step), gradOf(r, 2 * step + 1)]);
      expect(ranks[0].updates[step]).toEqual(mean(all));
      expect(ranks[1].updates[step]).toEqual(ranks[0].updates[step]);
    }
  });

  it('resetAccumulation drops a half-summed step', async () => {
    const ranks = ring(2, () => ({ backwardPassesPerStep: 2 }));
    await pass(ranks, () => new Float32Array(N).fill(1000));
    ranks.forEach((k) => k.reducer.resetAccumulation());
    await pass(ranks, (r) => gradOf(r, 0));
    await pass(ranks, (r) => gradOf(r, 1));
    expect(ranks[0].updates).toEqual([mean([gradOf(0, 0), gradOf(0, 1), gradOf(1, 0), gradOf(1, 1)])]);
  });

  it("weighs each rank's gradient by its share, and refuses a weight that is not a finite number >= 0", async () => {
    const ranks = ring(2);
    await pass(
      ranks,
      (r) => gradOf(r, 0),
      0,
      (r) => (r === 0 ? 0.5 : 1.5),
    );
    const half = gradOf(0, 0).map((v) => v * 0.5);
    const more = gradOf(1, 0).map((v) => v * 1.5);
    expect(ranks[0].updates[0]).toEqual(mean([half, more]));
    for (const weight of [-1, NaN, Infinity])
      await expect(ranks[0].reducer.reduce({ weight, step: 1 }, () => {})).rejects.toMatchObject({
        code: ErrorCode.InvalidArgument,
        message: expect.stringContaining('weight must be a finite number >= 0'),
      });
  });

  it('runs the checks in order around the sum, with their factor; a non-finite sum or a failing check applies nothing', async () => {
    const seen: string[] = [];
    const checks = (r: number): GradientCheck[] => [
      { before: () => void seen.push(`first ${r}`) },
      { before: () => (r === 1 ? 0 : 1), after: async (_c, _g, scale) => void seen.push(`after ${r} ${scale}`) },
    ];
    const ranks = ring(2, (r) => ({ checks: checks(r) }));
    await pass(ranks, (r) => gradOf(r, 0));
    // Rank 1 left itself out (factor 0): the average is rank 0's gradient over 2.
    expect(ranks[0].updates[0]).toEqual(mean([gradOf(0, 0), new Float32Array(N)]));
    expect(seen.sort()).toEqual(['after 0 0.5', 'after 1 0.5', 'first 0', 'first 1']);
    const inf = (r: number) => gradOf(r, 1).map((v, i) => (i === 20 ? Infinity : v));
    const [result] = await settle(ranks, inf);
    expect(result.status).toBe('rejected');
    expect((result as PromiseRejectedResult).reason).toMatchObject({
      detail: { tensor: 'b', index: 4, diverged: true },
    });
    expect(ranks[0].updates.length).toBe(1);
  });
});

describe('what the reducer keeps between steps', () => {
  const clip = { rule: 'centered-clip', trim: 0, tau: 2 } as const;
  /** Centered clip over 3 ranks; each rank's check fails its `failAt`-th step after the sum (never: -1). */
  const clipRing = (failAt: number) =>
    ring(3, () => {
      let steps = 0;
      const check: GradientCheck = {
        after: async () => {
          if (steps++ === failAt) throw new Error('check failed');
        },
      };
      return { aggregation: clip, checks: [check] };
    });
  /** Rank 2 sends nine times the others': the clip holds it back. */
  const grads = (step: number) => (r: number) => gradOf(r, step).map((v) => v * (r === 2 ? 9 : 1));

  it("centered clip takes a step's aggregate as its reference once the step's checks passed, and forgets it when the ring re-forms", async () => {
    const fresh = clipRing(-1);
    await pass(fresh, grads(1));
    const fromZeros = fresh[0].updates[0];
    const kept = clipRing(-1);
    await pass(kept, grads(0));
    await pass(kept, grads(1));
    expect(kept[0].updates[1]).not.toEqual(fromZeros);
    // A step whose check failed leaves the reference at zeros: the next step is a first step.
    const failed = clipRing(0);
    const first = await settle(failed, grads(0));
    expect(first.map((x) => x.status)).toEqual(['rejected', 'rejected', 'rejected']);
    await pass(failed, grads(1));
    expect(failed[0].updates).toEqual([fromZeros]);
    const reformed = clipRing(-1);
    await pass(reformed, grads(0));
    reformed.forEach((k) => k.reducer.ringReformed());
    await pass(reformed, grads(1));
    expect(reformed[0].updates[1]).toEqual(fromZeros);
  });

  it("int8's residual carries what one step cut off into the next, and is dropped when the ring re-forms", async () => {
    const odd = (r: number) => Float32Array.from({ length: N }, (_, i) => (i * 0.37 + r) % 1.3);
    const fresh = ring(2, () => ({ compression: 'int8' }));
    await pass(fresh, (r) => gradOf(r, 1));
    const kept = ring(2, () => ({ compression: 'int8' }));
    await pass(kept, odd);
    await pass(kept, (r) => gradOf(r, 1));
    expect(kept[0].updates[1]).not.toEqual(fresh[0].updates[0]);
    const reformed = ring(2, () => ({ compression: 'int8' }));
    await pass(reformed, odd);
    reformed.forEach((k) => k.reducer.ringReformed());
    await pass(reformed, (r) => gradOf(r, 1));
    expect(reformed[0].updates[1]).toEqual(fresh[0].updates[0]);
  });
});

describe('GradientAccumulator', () => {
  it('returns the sum on the k-th pass, its prescale 1/k; one pass goes through untouched', () => {
    const acc = new GradientAccumulator(3);
    expect(acc.prescale).toBeCloseTo(1 / 3, 15);
    expect(acc.add(Float32Array.of(1, 2))).toBeNull();
    expect(acc.add(Float32Array.of(3, 4))).toBeNull();
    expect(acc.add(Float32Array.of(5, 6))).toEqual(Float32Array.of(9, 12));
    acc.reset();
    acc.add(Float32Array.of(1, 1));
    acc.add(Float32Array.of(1, 1));
    expect(acc.add(Float32Array.of(1, 1))).toEqual(Float32Array.of(3, 3));
    const one = new GradientAccumulator(1);
    const g = Float32Array.of(7);
    expect(one.add(g)).toBe(g);
    expect(one.prescale).toBeUndefined();
  });
});

describe('StepClock', () => {
  it("its gradients-read check reads only without a transform, and hands a transform the step's gradients and its time so far", async () => {
    const clock = new StepClock();
    expect(clock.gradientsRead(undefined)).toMatchObject({ readsOnly: true, rankLocal: true });
    const calls: [number, number][] = [];
    const check = clock.gradientsRead((g, step, ms) => {
      calls.push([step, ms]);
      g[0] = 42;
    });
    expect(check.readsOnly).toBe(false);
    clock.begin(performance.now());
    const g = new Float32Array(2);
    const [comm] = createMemoryRing(1);
    await check.before!(comm, g, 7);
    comm.close();
    expect(g[0]).toBe(42);
    expect(calls[0][0]).toBe(7);
    expect(calls[0][1]).toBeGreaterThanOrEqual(0);
    expect(clock.computeMs).toBeGreaterThanOrEqual(calls[0][1]);
  });
});
