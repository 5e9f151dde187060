/**
 * Gradient accumulation on the GPU (`--micro-batch M`): a step of B samples
 * runs as B/M forward-backward passes of a plan built at batch M, so the
 * step's activations take the memory of M samples, not B.
 *
 * Each pass's plan writes its gradient (the mean over its own targets) into
 * `scratch`, a second flat buffer, and one kernel (accumulate.wgsl) adds it
 * into the model's `grads`, weighed by the pass's share of the step's counted
 * targets; the step's first pass overwrites instead. So `grads` ends as the
 * gradient of the mean over all B samples, as one pass at B gives, and is
 * read back (or reduced over the ring) once per step. The pass's mean loss is
 * weighed into the step's loss the same way.
 *
 * Why a scratch and an add, not passes that add into `grads` themselves: every
 * op's backward overwrites its gradients (plan.ts), and teaching each kernel
 * to add would touch all of them; the add is one pass over the flat buffer
 * per micro-batch, small beside a forward-backward.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from '../gpu/gpu.ts';
import { compileAccumulate, planAccumulate } from '../gpu/kernels/accumulate.ts';
import { RESULT_LOSS } from '../nn/loss.ts';
import type { BucketRange } from './grad-buckets.ts';
import type { Model } from './model.ts';

/** Refuses a micro-batch that is not a whole number ≥ 1. */
export function checkMicroBatchValue(microBatch: number): void {
  if (!Number.isInteger(microBatch) || microBatch < 1)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the micro-batch must be a whole number >= 1, got ${microBatch}`,
      { microBatch },
    );
}

/** Passes of `microBatch` in a step of `batch`: refused unless they split it exactly. */
export function passesOf(batch: number, microBatch: number): number {
  if (batch % microBatch !== 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `a micro-batch of ${microBatch} does not divide the batch of ${batch}; use a --micro-batch that divides --batch (a divisor of ${batch}), or a --batch that is a multiple of ${microBatch}`,
      { batch, microBatch },
    );
  return batch / microBatch;
}

/**
 * What a trainer does with its `microBatch` option: checks that it splits the step's `batch` (before
 * any data or step) and tells the model. A model that cannot split its steps is refused by name.
 */
export function useMicroBatch(model: Model, microBatch: number | undefined, batch: number): void {
  if (microBatch === undefined) return;
  checkMicroBatchValue(microBatch);
  passesOf(batch, microBatch);
  if (!model.setMicroBatch)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `model ${model.identity.name} cannot split a step into micro-batches (it has no setMicroBatch); drop --micro-batch`,
      { model: model.identity.name, microBatch },
    );
  model.setMicroBatch(microBatch);
}

/**
 * Each pass's weight in the step's mean: its share of the targets the loss counts, those ≥ 0 (−1 is
 * the ignore index; with none ignored every pass weighs 1/passes), as `evaluate` weighs its chunks.
 * A step with no counted target weighs every pass 0 (each pass's loss and gradient are then 0, not NaN).
 */
export function passWeights(labels: ArrayLike<number>, passes: number): Float32Array {
  const weights = new Float32Array(passes);
  const per = labels.length / passes;
  let total = 0;
  for (let k = 0; k < passes; k++) {
    let counted = 0;
    for (let i = k * per; i < (k + 1) * per; i++) if (labels[i] >= 0) counted++;
    weights[k] = counted;
    total += counted;
  }
  for (let k = 0; k < passes; k++) weights[k] /= Math.max(total, 1);
  return weights;
}

/** What a step of one number of passes records after each of them: the gradient's add and the loss's. */
interface PassSteps {
  weights: GPUBuffer;
  grads: Dispatch[][];
  loss: Dispatch[][];
  /** The last pass's gradient add, cut by gradient bucket (by bucket size). */
  byBucket: Map<number, Dispatch[][]>;
}

/** The buffers a step's passes meet in. */
export interface AccumulationBuffers {
  /** The model's flat gradient: the step's sum. */
  grads: GPUBuffer;
  /** Where the plan at the micro-batch writes each pass's gradients (the same layout). */
  scratch: GPUBuffer;
  /** That plan's results buffer (each pass's mean loss at RESULT_LOSS). */
  passResults: GPUBuffer;
  flatLength: number;
}

export class GradientAccumulation {
  /** The step's weighed loss at RESULT_LOSS, as a plan's results buffer holds it. */
  readonly results: GPUBuffer;
  private readonly steps = new Map<number, PassSteps>();

  constructor(
    private readonly gpu: Gpu,
    private readonly b: AccumulationBuffers,
    /** Makes a storage buffer of `words` floats that the model owns (and frees). */
    private readonly storage: (words: number, label: string) => GPUBuffer,
  ) {
    // Its passes' adds are planned later, once the step's batch is known, when no warm-up may abandon
    // the plan they belong to (Gpu.compileAhead destroys what an attempt made): their pipeline comes now.
    compileAccumulate(gpu);
    this.results = storage(4, 'micro-batch/results');
  }

  /** Plans the adds of a step of `passes` passes (made once per number of passes). */
  plan(passes: number): PassSteps {
    let s = this.steps.get(passes);
    if (s) return s;
    const { gpu, b } = this;
    const weights = this.storage(passes, 'micro-batch/weights');
    const passLoss = { buffer: b.passResults, offset: RESULT_LOSS * 4, size: 4 };
    const stepLoss = { buffer: this.results, offset: RESULT_LOSS * 4, size: 4 };
    const each = <T>(make: (pass: { index: number; first: boolean }) => T) =>
      Array.from({ length: passes }, (_, index) => make({ index, first: index === 0 }));
    s = {
      weights,
      grads: each((pass) => planAccumulate(gpu, { weights, src: b.scratch, dst: b.grads }, b.flatLength, pass)),
      loss: each((pass) => planAccumulate(gpu, { weights, src: passLoss, dst: stepLoss }, 1, pass)),
      byBucket: new Map(),
    };
    this.steps.set(passes, s);
    return s;
  }

  /** After pass `index` of `passes`: its gradient and its loss added into the step's. */
  afterPass(passes: number, index: number): Dispatch[] {
    const s = this.plan(passes);
    return [...s.grads[index], ...s.loss[index]];
  }

  /** The last pass's gradient add over each bucket's range, in the buckets' order; its loss's add is `lastLoss`. */
  bucketSteps(passes: number, bucketBytes: number, ranges: readonly BucketRange[]): Dispatch[][] {
    const s = this.plan(passes);
    let cut = s.byBucket.get(bucketBytes);
    if (cut) return cut;
    const pass = { index: passes - 1, first: passes === 1 };
    cut = ranges.map((r) => {
      const range = (buffer: GPUBuffer) => ({ buffer, offset: r.offset * 4, size: r.length * 4 });
      const buffers = { weights: s.weights, src: range(this.b.scratch), dst: range(this.b.grads) };
      return planAccumulate(this.gpu, buffers, r.length, pass);
    });
    s.byBucket.set(bucketBytes, cut);
    return cut;
  }

  /** The last pass's loss add. */
  lastLoss(passes: number): Dispatch[] {
    return this.plan(passes).loss[passes - 1];
  }

  /** Writes this step's weights (ordered after everything recorded so far). */
  writeWeights(passes: number, weights: Float32Array): void {
    this.gpu.write(this.plan(passes).weights, weights);
  }
}
