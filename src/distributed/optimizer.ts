/**
 * DistributedOptimizer: Horovod's wrapper, over our flat buffers. After each
 * forward/backward it reads the model's flat gradient buffer, averages it in
 * place over every rank (allreduceInPlace), writes it back and lets the
 * wrapped optimizer step. Because every rank starts from the same weights
 * (broadcastParameters) and applies the same averaged gradient, the weights
 * stay identical on every rank without ever being sent again.
 *
 * With backwardPassesPerStep = k, gradients of k passes are summed locally
 * and the allreduce runs once every k passes (fewer, larger messages: the
 * knob for slow links).
 *
 * With int8 compression the optimizer keeps an error-feedback residual as
 * long as the gradient: what quantisation cut off this step is sent with the
 * next one, so no part of any gradient is lost over time.
 */
import { now } from '../core/events.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { allreduceInPlace } from '../collectives/allreduce.ts';
import { DEFAULT_FUSION_THRESHOLD_BYTES } from '../collectives/fusion.ts';
import type { Compression, ReduceOp } from '../collectives/types.ts';
import { robustAllreduce, type Aggregation } from '../collectives/robust-aggregate.ts';
import { bucketBytesFor, type GradientBucket } from '../engine/grad-buckets.ts';
import type { Model } from '../engine/model.ts';
import type { Optimizer } from '../engine/optimizer.ts';
import { configSettingName, refuseConflicts } from './setting-conflicts.ts';
import { fnv1a32 } from '../core/hash.ts';
import { currentRing, type CurrentRing } from './elastic-ring.ts';
import { reduceBucketsAsRead } from './overlap.ts';
import type { DistributedOptimizerOptions, GradientCheck } from './optimizer-types.ts';

export type { DistributedOptimizerOptions, GradientCheck } from './optimizer-types.ts';

/** DistributedOptimizerOptions with the defaults filled in and checked: this optimizer's and the TF.js one's. */
export function reduceSettings(options: DistributedOptimizerOptions): Required<
  Omit<DistributedOptimizerOptions, 'timeoutMs' | 'checks' | 'aggregation' | 'overlap'>
> & {
  timeoutMs: number | undefined;
} {
  const backwardPassesPerStep = options.backwardPassesPerStep ?? 1;
  const op = options.op ?? 'average';
  if (!Number.isInteger(backwardPassesPerStep) || backwardPassesPerStep < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `backwardPassesPerStep must be a positive integer, got ${options.backwardPassesPerStep}`,
    );
  }
  if (op !== 'average' && op !== 'sum') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `DistributedOptimizer op must be 'average' or 'sum', got '${String(op)}'`,
    );
  }
  return {
    compression: options.compression ?? 'none',
    backwardPassesPerStep,
    op,
    fusionThresholdBytes: options.fusionThresholdBytes ?? DEFAULT_FUSION_THRESHOLD_BYTES,
    timeoutMs: options.timeoutMs,
  };
}

export interface StepResult {
  /** True when this call averaged gradients and updated the weights. */
  applied: boolean;
  /** Payload bytes this rank put on the wire for the allreduce (0 when not applied). */
  bytesSent: number;
}

export class DistributedOptimizer {
  readonly compression: Compression;
  readonly backwardPassesPerStep: number;
  readonly op: 'average' | 'sum';
  readonly fusionThresholdBytes: number;
  private readonly timeoutMs: number | undefined;
  private readonly checks: readonly GradientCheck[];
  private readonly observeReceived: ((offset: number, values: Float32Array) => void) | undefined;
  /** The ring: a communicator of its own, or a holder that an elastic trainer re-forms (elastic-ring.ts). */
  private readonly ring: CurrentRing;
  private readonly aggregation: Aggregation | undefined;
  private readonly overlap: boolean;
  private accumulated: Float32Array | null = null;
  private passes = 0;
  private gradName: string | null = null;
  /** centered-clip's reference: the previous step's aggregate (null: zeros, at the start and after a re-form). */
  private clipReference: Float32Array | null = null;
  /** This step's aggregate, the reference once its update is applied. */
  private nextClipReference: Float32Array | null = null;
  /** int8's and top-k's error-feedback residual (see ringAllreduceInPlace); null until the first step. */
  private residual: Float32Array | null = null;

  constructor(
    ring: Communicator | CurrentRing,
    readonly model: Model,
    readonly optimizer: Optimizer,
    options: DistributedOptimizerOptions = {},
  ) {
    const s = reduceSettings(options);
    this.compression = s.compression;
    this.backwardPassesPerStep = s.backwardPassesPerStep;
    this.op = s.op;
    this.fusionThresholdBytes = s.fusionThresholdBytes;
    this.timeoutMs = s.timeoutMs;
    this.ring = currentRing(ring);
    this.checks = options.checks ?? [];
    // Only when a check asks for them: receiving segments is then hashed on the way.
    const observers = this.checks.filter((c) => c.observe);
    this.observeReceived =
      observers.length > 0
        ? (offset, values) => observers.forEach((c) => c.observe!(this.comm, offset, values))
        : undefined;
    this.aggregation = options.aggregation?.rule === 'mean' ? undefined : options.aggregation;
    this.overlap = options.overlap ?? true;
    const settings = { aggregation: this.aggregation, compression: this.compression };
    refuseConflicts(settings, configSettingName(settings));
  }

  /** The communicator the next step reduces over (the holder's current one, when built over a session or an elastic ring). */
  get comm(): Communicator {
    return this.ring.comm;
  }

  /** After the ring re-formed with new members (elastic training): drops what belonged to the old ring. */
  ringReformed(): void {
    // Which rank sends which positions depends on the ring: a residual of the old ring means nothing in the new one.
    this.residual?.fill(0);
    // A joiner holds no reference: every rank of the new ring starts centered-clip from zeros alike.
    this.clipReference = null;
    this.nextClipReference = null;
  }

  /**
   * Bytes per gradient bucket when a step may reduce its gradients bucket by bucket as backward
   * finishes them (forwardBackwardBuckets, overlap.ts); undefined where something needs this rank's
   * whole gradient before anything is sent, or where buckets would send other values.
   */
  get overlapBucketBytes(): number | undefined {
    if (!this.overlap) return undefined;
    // Robust rules gather every rank's whole contribution in collectives of their own (centered clip
    // keeps the whole last aggregate): there is no ring allreduce to start early.
    if (this.aggregation) return undefined;
    // k passes are summed here and reduced once, on the k-th: the passes before send nothing to overlap.
    if (this.backwardPassesPerStep > 1) return undefined;
    // int8 scales each ring segment and top-k keeps the k largest of the whole tensor, each with an
    // error-feedback residual of the whole: bucket by bucket they would send other values.
    if (this.compression !== 'none' && this.compression !== 'fp16') return undefined;
    // The verified allreduce sketches the ring chunks of the whole buffer (cut by the fusion
    // threshold: step-checks.ts); buckets would be reduced in other chunks than it checks.
    if (this.observeReceived) return undefined;
    // A check that may change the contribution in a way every rank must know of (the doubt rule's
    // factors) sees the whole gradient before any of it is sent. A caller's transform on one rank
    // does not change how the ranks cut the gradient: that rank only waits for every bucket (stepOverlapped).
    if (this.checks.some((c) => c.before && !c.readsOnly && !c.rankLocal)) return undefined;
    // Each bucket is one collective; the fusion threshold caps it as it caps any of them.
    if (this.fusionThresholdBytes < 4) return undefined;
    return bucketBytesFor(this.model.flatLength * 4, this.fusionThresholdBytes);
  }

  /**
   * Call after model.forwardBackward() (or with the buckets of model.forwardBackwardBuckets(),
   * sized by `overlapBucketBytes`: then each bucket's reduction starts as soon as it is read back).
   * Every backwardPassesPerStep-th call averages the summed gradients over all ranks and steps the
   * optimizer. `weight` scales this rank's gradient before the average (1: every rank counts
   * alike): a rank with more of the step's counted targets weighs more. `trainingStep` is what the
   * checks see as the step (every rank must give the same): the wrapped optimizer's step count unless given.
   */
  async step(
    lr?: number,
    weight = 1,
    trainingStep = this.optimizer.stepCount,
    buckets?: readonly GradientBucket[],
  ): Promise<StepResult> {
    // This rank's share of the step (its gradient is a mean over its own examples); scaled here,
    // not as the allreduce's prescale, which every rank must give alike.
    if (weight !== 1 && (!Number.isFinite(weight) || weight < 0))
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `DistributedOptimizer.step: weight must be a finite number >= 0, got ${weight}`,
      );
    if (buckets && this.overlapBucketBytes !== undefined) return this.stepOverlapped(lr, weight, trainingStep, buckets);
    const waited = now();
    const grads = buckets ? await wholeOf(buckets, this.model.flatLength) : await this.model.readGrads();
    // The read-back is its own span on the timeline, so GPU time is never mistaken for the ring's.
    const ev = this.comm.events;
    if (ev.active)
      ev.emit({ type: 'gpu-wait', t: waited, rank: this.comm.rank, what: 'gradients', ms: now() - waited });
    if (weight !== 1) for (let i = 0; i < grads.length; i++) grads[i] *= weight;
    if (this.backwardPassesPerStep > 1) {
      if (!this.accumulated) this.accumulated = new Float32Array(grads.length);
      const acc = this.accumulated;
      for (let i = 0; i < grads.length; i++) acc[i] += grads[i];
      this.passes++;
      if (this.passes < this.backwardPassesPerStep) return { applied: false, bytesSent: 0 };
    }
    const local = this.accumulated ?? grads;
    let factor = 1;
    for (const check of this.checks) {
      const f = await check.before?.(this.comm, local, trainingStep);
      if (typeof f === 'number') factor *= f;
    }
    if (factor !== 1) for (let i = 0; i < local.length; i++) local[i] *= factor;
    const before = this.comm.stats.bytesSent;
    const reduced = await this.allreduceGradients(local);
    return this.apply(reduced, lr, before);
  }

  /**
   * The step with its buckets reduced as they are read back (overlap.ts). The checks that only read
   * see a copy of the contribution once every bucket is read; on a rank with a check that changes
   * it (a caller's transform) every bucket is read first, and each reading check sees the
   * contribution as the checks before it in the list left it, as on the whole-gradient path.
   */
  private async stepOverlapped(
    lr: number | undefined,
    weight: number,
    trainingStep: number,
    buckets: readonly GradientBucket[],
  ): Promise<StepResult> {
    const comm = this.comm;
    const before = comm.stats.bytesSent;
    const flat = new Float32Array(this.model.flatLength);
    const hooked = this.checks.filter((c) => c.before);
    const overlap = hooked.every((c) => c.readsOnly);
    // Overlapping, the sums overwrite `flat` while later buckets are read: the checks read a copy.
    const local = overlap && hooked.length > 0 ? new Float32Array(this.model.flatLength) : null;
    const readers: { check: GradientCheck; local: Float32Array }[] = overlap
      ? hooked.map((check) => ({ check, local: local! }))
      : [];
    await reduceBucketsAsRead({
      comm,
      buckets,
      weight,
      flat,
      local,
      overlap,
      name: this.gradientsName,
      prepare: async () => {
        let factor = 1;
        let seen: Float32Array | null = null;
        for (const check of hooked) {
          if (check.readsOnly) {
            readers.push({ check, local: (seen ??= flat.slice()) });
            continue;
          }
          const f = await check.before!(comm, flat, trainingStep);
          if (typeof f === 'number') factor *= f;
          seen = null;
        }
        if (factor !== 1) for (let i = 0; i < flat.length; i++) flat[i] *= factor;
      },
      beforeLast: async () => {
        for (const { check, local } of readers) {
          const f = await check.before!(comm, local, trainingStep);
          if (typeof f === 'number' && f !== 1)
            throw new RingtrainError(
              ErrorCode.InvalidArgument,
              `a gradient check that said it only reads resolved to the factor ${f}; give it readsOnly: false`,
            );
        }
      },
      reduce: (values, name) =>
        allreduceInPlace(comm, values, {
          name,
          op: this.op,
          compression: this.compression,
          chunkBytes: this.fusionThresholdBytes,
          timeoutMs: this.timeoutMs,
        }),
    });
    return this.apply(flat, lr, before);
  }

  /** The reduced gradients: the checks' `after`, the finite check, then the update. */
  private async apply(reduced: Float32Array, lr: number | undefined, before: number): Promise<StepResult> {
    const prescale = this.backwardPassesPerStep > 1 ? 1 / this.backwardPassesPerStep : 1;
    for (const check of this.checks)
      await check.after?.(this.comm, reduced, prescale * (this.op === 'average' ? 1 / this.comm.size : 1), prescale);
    for (const e of this.model.layout) checkFinite(e.name, reduced.subarray(e.offset, e.offset + e.length));
    if (this.nextClipReference) [this.clipReference, this.nextClipReference] = [this.nextClipReference, null];
    this.model.writeGrads(reduced);
    this.optimizer.step(lr);
    if (this.accumulated) {
      this.accumulated.fill(0);
      this.passes = 0;
    }
    return { applied: true, bytesSent: this.comm.stats.bytesSent - before };
  }

  /** Drops gradients summed so far (after a failed step, before retrying it). */
  resetAccumulation(): void {
    this.accumulated?.fill(0);
    this.passes = 0;
  }

  private async allreduceGradients(flat: Float32Array): Promise<Float32Array> {
    // The flat buffer is reduced where it lies (chunks of the fusion threshold, no packing or
    // unpacking). Its name carries the layout, so ranks with different models fail negotiation.
    const passes = this.backwardPassesPerStep;
    if (this.aggregation) {
      // Robust rules give a mean-like value: scaled as the ring's average (or sum) of the passes' mean would be.
      const reference = this.clipReference?.length === flat.length ? this.clipReference : undefined;
      const out = await robustAllreduce(this.comm, flat, this.aggregation, {
        name: this.gradientsName,
        timeoutMs: this.timeoutMs,
        reference,
      });
      // Kept before scaling: the next step's contributions are compared with this step's aggregate of the same kind
      // (taken up once the step's checks passed: a step they fail leaves the reference as it was).
      if (this.aggregation.rule === 'centered-clip') this.nextClipReference = out;
      const scale = (passes > 1 ? 1 / passes : 1) * (this.op === 'sum' ? this.comm.size : 1);
      for (let i = 0; i < flat.length; i++) flat[i] = out[i] * scale;
      return flat;
    }
    const feedback = this.compression === 'int8' || this.compression.startsWith('topk:');
    if (feedback && this.residual?.length !== flat.length) this.residual = new Float32Array(flat.length);
    await allreduceInPlace(this.comm, flat, {
      errorFeedback: feedback ? this.residual! : undefined,
      name: this.gradientsName,
      op: this.op,
      compression: this.compression,
      chunkBytes: this.fusionThresholdBytes,
      // Summed passes become their mean here, so one step of k passes equals one pass over k batches.
      prescale: passes > 1 ? 1 / passes : undefined,
      timeoutMs: this.timeoutMs,
      observeReceived: this.observeReceived,
    });
    return flat;
  }

  /** 'gradients' plus a hash of the layout (names, shapes, offsets): equal on ranks that train the same model. */
  private get gradientsName(): string {
    if (this.gradName) return this.gradName;
    const text = JSON.stringify(this.model.layout.map((e) => [e.name, e.offset, e.length]));
    return (this.gradName = `gradients (${this.model.layout.length} tensors, layout #${fnv1a32(text).toString(16)})`);
  }
}

/** The buckets' values in one flat buffer (a caller that read them in buckets, on the whole-gradient path). */
async function wholeOf(buckets: readonly GradientBucket[], flatLength: number): Promise<Float32Array> {
  const flat = new Float32Array(flatLength);
  for (const b of buckets) flat.set(await b.ready, b.offset);
  return flat;
}

function checkFinite(name: string, data: Float32Array): void {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i])) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the averaged gradient of '${name}' holds ${data[i]} at index ${i}: a rank diverged; lower the learning rate`,
        { tensor: name, index: i, diverged: true },
      );
    }
  }
}
