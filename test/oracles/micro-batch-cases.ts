/**
 * Gradient accumulation (`--micro-batch`, src/engine/micro-batch.ts) as oracle
 * cases, so they run under Node and Deno alike (cases.ts): the accumulate
 * kernel against an f64 reference, and whole models whose micro-batched step
 * must give what one pass at the full batch gives (the reference here is that
 * unsplit GPU pass, planned at the full batch).
 */
import { Mlp } from '../../src/engine/mlp.ts';
import type { GraphModel } from '../../src/engine/graph-model.ts';
import { Transformer } from '../../src/engine/transformer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planAccumulate } from '../../src/gpu/kernels/accumulate.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';
import { mulberry32 } from '../../src/data/random.ts';
import { asOracleCase, maxAbsError, seededUniform, type ComparedCase, type Comparison } from './comparisons.ts';
import type { OracleCase } from './oracle-case.ts';

/**
 * Three passes into a vector NaN-filled before the first: the first overwrites, the others add, each
 * weighed. With `maxBindingBytes`, on a Gpu of that binding limit: the vectors in slices.
 */
function accumulateCase(maxBindingBytes?: number): ComparedCase {
  const sliced = maxBindingBytes ? ` over ${maxBindingBytes / 4}-word bindings` : '';
  return {
    name: `accumulate: 3 weighed passes, the first overwriting a NaN-filled sum${sliced}`,
    async run(gpu) {
      const g = maxBindingBytes ? await acquireGpu({ maxBindingBytes }) : gpu;
      try {
        return await accumulateOn(g, maxBindingBytes ? 4 : 1);
      } finally {
        if (g !== gpu) g.destroy();
      }
    },
  };
}

async function accumulateOn(gpu: Gpu, slices: number): Promise<Comparison[]> {
  const n = 1000;
  const weights = Float32Array.from([0.5, 0.125, 0.375]);
  const parts = [0, 1, 2].map((k) => seededUniform(n, 700 + k));
  const want = new Float32Array(n);
  for (let i = 0; i < n; i++) want[i] = parts.reduce((sum, p, k) => sum + Math.fround(weights[k] * p[i]), 0);
  const made = [gpu.upload(weights), gpu.upload(new Float32Array(n).fill(NaN)), ...parts.map((p) => gpu.upload(p))];
  try {
    const [w, dst, ...srcs] = made;
    const planned = srcs.map((src, index) =>
      planAccumulate(gpu, { weights: w, src, dst }, n, { index, first: index === 0 }),
    );
    for (const d of planned) gpu.record(d);
    const got = await gpu.readF32(dst, 0, n);
    return [
      // Three f32 adds of O(1) values: a few ulps of 1.
      { what: 'sum', maxError: maxAbsError(got, want), tolerance: 1e-6, count: n },
      { what: 'slices', maxError: planned[0].length === slices ? 0 : 1, tolerance: 0, count: 1 },
    ];
  } finally {
    for (const b of made) b.destroy();
  }
}

/** Inputs for a model: features in [0, 1), or token ids below `ids` when given. */
function inputsFor(model: GraphModel, batch: number, seed: number, ids?: number): Float32Array {
  const random = mulberry32(seed);
  const x = Float32Array.from({ length: batch * model.inputSize }, () => random());
  return ids ? x.map((v) => Math.floor(v * ids)) : x;
}

/** max |got − want| over max |want|: gradients are small, so an absolute error says little. */
function relativeError(got: Float32Array, want: Float32Array): number {
  let scale = 0;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  return maxAbsError(got, want) / Math.max(scale, 1e-30);
}

/**
 * One step at `batch` split into passes of `micro` against the same step in one pass: the flat
 * gradient (read whole, and bucket by bucket as backward finishes) and the loss (waited for, and
 * deferred). f32 sums in another order: 1e-5 of the largest gradient leaves a wide margin.
 */
async function compareSplit(
  model: GraphModel,
  x: Float32Array,
  labels: number[],
  micro: number,
): Promise<Comparison[]> {
  const { flatLength } = model;
  const wholeLoss = await model.forwardBackward(x, labels);
  const whole = await model.readGrads();
  model.setMicroBatch(micro);
  const splitLoss = await model.forwardBackward(x, labels);
  const split = await model.readGrads();
  const sink = new DeferredScalars(model.gpu, 1);
  try {
    const into = new Float32Array(flatLength);
    const buckets = model.forwardBackwardBuckets(x, labels, undefined, sink, 1024, into);
    await Promise.all(buckets.map((b) => b.ready));
    const [deferredLoss] = await sink.collect();
    const lossError = (loss: number) => Math.abs(loss - wholeLoss) / Math.abs(wholeLoss);
    const mass = whole.reduce((sum, v) => sum + Math.abs(v), 0);
    return [
      { what: 'loss', maxError: lossError(splitLoss), tolerance: 1e-6, count: 1 },
      { what: 'deferred loss', maxError: lossError(deferredLoss), tolerance: 1e-6, count: 1 },
      { what: 'flat gradient', maxError: relativeError(split, whole), tolerance: 1e-5, count: flatLength },
      { what: 'bucketed gradient', maxError: relativeError(into, whole), tolerance: 1e-5, count: flatLength },
      // More than one bucket, or the bucketed path tested nothing of the cut.
      { what: 'buckets', maxError: buckets.length > 1 ? 0 : 1, tolerance: 0, count: 1 },
      // A gradient of zeros would match trivially.
      { what: 'gradient mass', maxError: mass > 1e-3 ? 0 : 1, tolerance: 0, count: 1 },
    ];
  } finally {
    sink.destroy();
    model.setMicroBatch(undefined);
  }
}

const mlpCase: ComparedCase = {
  name: 'micro-batch: mlp, batch 12 in 3 passes of 4 equals one pass',
  async run(gpu: Gpu) {
    const model = new Mlp(gpu, { kind: 'mlp', inputSize: 20, hidden: [16, 8], classes: 5, seed: 41 });
    try {
      const labels = Array.from({ length: 12 }, (_, i) => (i * 7 + 2) % 5);
      return await compareSplit(model, inputsFor(model, 12, 42), labels, 4);
    } finally {
      model.destroy();
    }
  },
};

/**
 * The transformer with ignored targets (−1) spread unevenly over the passes (one pass keeps 4 of
 * its 16, another all): each pass must weigh by its counted targets, not 1/passes.
 */
const transformerCase: ComparedCase = {
  name: 'micro-batch: transformer, batch 6 in 3 passes of 2 with ignored targets equals one pass',
  async run(gpu: Gpu) {
    const model = new Transformer(gpu, {
      kind: 'transformer',
      vocab: 11,
      context: 8,
      layers: 2,
      width: 16,
      heads: 2,
      seed: 43,
    });
    try {
      const labels = Array.from({ length: 6 * 8 }, (_, i) => (i < 16 && i % 5 !== 0 ? -1 : (i * 3 + 1) % 11));
      return await compareSplit(model, inputsFor(model, 6, 44, 11), labels, 2);
    } finally {
      model.destroy();
    }
  },
};

export const MICRO_BATCH_CASES: OracleCase[] = [accumulateCase(), accumulateCase(1024), mlpCase, transformerCase].map(
  asOracleCase,
);
