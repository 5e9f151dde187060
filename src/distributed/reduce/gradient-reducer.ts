/**
 * GradientReducer, as PyTorch DDP's Reducer: it turns this rank's gradients
 * into the ring's reduced gradient and hands that to whoever applies updates.
 * It owns what lies between: the sum of backward passes (accumulator.ts), the
 * buckets and whether a step overlaps their reduction with backward (decided
 * once: overlap-plan.ts), the checks around the sum (gradient-check.ts), and
 * what the sum keeps between steps, compression's residual and a robust
 * rule's reference (gradient-sum.ts).
 *
 * A step's gradients come whole (the model's flat buffer, read back here) or
 * in buckets that backward finishes one by one; each is scaled by this rank's
 * weight, its share of the step, before anything else sees it.
 */
import { now } from '../../core/events.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { fnv1a32 } from '../../core/hash.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import type { GradientBucket } from '../../engine/grad-buckets.ts';
import type { Model } from '../../engine/model.ts';
import { configSettingName, refuseConflicts } from '../../job/conflicts.ts';
import { currentRing, type CurrentRing } from '../session/elastic-ring.ts';
import { GradientAccumulator } from './accumulator.ts';
import { CheckPipeline } from './gradient-check.ts';
import { GradientSum } from './gradient-sum.ts';
import { planOverlap, type OverlapPlan } from './overlap-plan.ts';
import { reduceBucketsAsRead } from './overlap.ts';
import { reduceSettings, type GradientReducerOptions, type ReduceSettings } from './settings.ts';

/** What the reducer reads of a model: its layout, and its gradients when a step hands over no buckets. */
export type ReducedModel = Pick<Model, 'flatLength' | 'layout' | 'readGrads'>;

/** One backward pass's gradients, as a step hands them over. */
export interface ReducePass {
  /** Scales this rank's gradients before anything else sees them (1: every rank counts alike). */
  weight: number;
  /** What the checks see as the step (every rank gives the same). */
  step: number;
  /** The gradients in buckets as backward finishes them (sized by `bucketBytes`); absent: read whole from the model. */
  buckets?: readonly GradientBucket[];
}

export interface StepResult {
  /** True when this call averaged gradients and updated the weights. */
  applied: boolean;
  /** Payload bytes this rank put on the wire for the allreduce (0 when not applied). */
  bytesSent: number;
}

export class GradientReducer {
  readonly settings: ReduceSettings;
  /** Whether steps reduce buckets as backward finishes them, and their size: decided here, once, and read from here. */
  readonly plan: OverlapPlan;
  private readonly ring: CurrentRing;
  private readonly checks: CheckPipeline;
  private readonly accumulator: GradientAccumulator;
  private readonly sum: GradientSum;
  private gradName: string | null = null;
  /**
   * Where the bucket path's steps land and are reduced: one buffer the size of the gradient for
   * the whole run (the buckets tile it, so each step overwrites all of it), not a new one a step
   * that the collector frees some time later.
   */
  private bucketFlat: Float32Array | null = null;

  constructor(
    ring: Communicator | CurrentRing,
    private readonly model: ReducedModel,
    options: GradientReducerOptions = {},
  ) {
    const s = (this.settings = reduceSettings(options));
    this.ring = currentRing(ring);
    this.checks = new CheckPipeline(options.checks ?? [], () => this.comm);
    const aggregation: Aggregation | undefined = options.aggregation?.rule === 'mean' ? undefined : options.aggregation;
    const conflicts = { aggregation, compression: s.compression };
    refuseConflicts(conflicts, configSettingName(conflicts));
    this.accumulator = new GradientAccumulator(s.backwardPassesPerStep);
    this.sum = new GradientSum(s, aggregation, this.checks);
    this.plan = planOverlap({
      overlap: options.overlap ?? true,
      aggregation,
      backwardPassesPerStep: s.backwardPassesPerStep,
      compression: s.compression,
      observes: this.checks.observeReceived !== undefined,
      changesForAll: this.checks.changesForAll,
      fusionThresholdBytes: s.fusionThresholdBytes,
      flatLength: model.flatLength,
    });
  }

  /** The communicator the next step reduces over (the holder's current one, when built over a session or an elastic ring). */
  get comm(): Communicator {
    return this.ring.comm;
  }

  /**
   * The buffer the bucket path reduces in (flatLength floats): a model that reads its buckets back
   * into it (Model.forwardBackwardBuckets's `into`) spares a gradient-sized copy a step.
   */
  get bucketTarget(): Float32Array {
    return (this.bucketFlat ??= new Float32Array(this.model.flatLength));
  }

  /** Bytes per gradient bucket when steps reduce buckets as backward finishes them; undefined: gradients are read whole. */
  get bucketBytes(): number | undefined {
    return this.plan.bucketBytes;
  }

  /**
   * Takes one pass's gradients. Every backwardPassesPerStep-th pass reduces the passes' sum over
   * every rank, checks it, and hands the reduced gradient to `update` (valid only during that call);
   * the passes before resolve to `applied: false` at once.
   */
  async reduce(pass: ReducePass, update: (reduced: Float32Array) => void): Promise<StepResult> {
    const { weight, step, buckets } = pass;
    // This rank's share of the step (its gradient is a mean over its own examples); scaled here,
    // not as the allreduce's prescale, which every rank must give alike.
    if (weight !== 1 && (!Number.isFinite(weight) || weight < 0))
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `DistributedOptimizer.step: weight must be a finite number >= 0, got ${weight}`,
      );
    if (buckets && this.bucketBytes !== undefined) return this.reduceBuckets(weight, step, buckets, update);
    const grads = await this.readWhole(buckets);
    if (weight !== 1) for (let i = 0; i < grads.length; i++) grads[i] *= weight;
    const local = this.accumulator.add(grads);
    if (!local) return { applied: false, bytesSent: 0 };
    await this.checks.before(this.comm, local, step);
    const before = this.comm.stats.bytesSent;
    const reduced = await this.sum.whole(this.comm, local, this.gradientsName, this.accumulator.prescale);
    return this.finish(reduced, update, before);
  }

  /** The step's buckets reduced as they are read back (overlap.ts), the checks' part from the pipeline. */
  private async reduceBuckets(
    weight: number,
    step: number,
    buckets: readonly GradientBucket[],
    update: (reduced: Float32Array) => void,
  ): Promise<StepResult> {
    const comm = this.comm;
    const before = comm.stats.bytesSent;
    const flat = this.bucketTarget;
    const checks = this.checks.forBuckets(comm, flat, step);
    await reduceBucketsAsRead({
      comm,
      buckets,
      weight,
      flat,
      ...checks,
      name: this.gradientsName,
      reduce: (values, name) => this.sum.bucket(comm, values, name),
    });
    return this.finish(flat, update, before);
  }

  /** The reduced gradients: the checks' `after`, the finite check, then the update. */
  private async finish(
    reduced: Float32Array,
    update: (reduced: Float32Array) => void,
    before: number,
  ): Promise<StepResult> {
    const prescale = this.accumulator.prescale ?? 1;
    const scale = prescale * (this.settings.op === 'average' ? 1 / this.comm.size : 1);
    // A check that sent before its verdict may ask for the sum again, at the factors the verdict gave (step-checks.ts).
    for (let answer = await this.checks.after(this.comm, reduced, scale, prescale); answer;) {
      reduced = await this.sum.whole(this.comm, answer.again, this.gradientsName, this.accumulator.prescale);
      answer = await this.checks.after(this.comm, reduced, scale, prescale);
    }
    for (const e of this.model.layout) checkFinite(e.name, reduced.subarray(e.offset, e.offset + e.length));
    this.sum.stepPassed();
    update(reduced);
    // Only now: with summed passes the reduced gradient is the accumulator's buffer.
    this.accumulator.reset();
    return { applied: true, bytesSent: this.comm.stats.bytesSent - before };
  }

  /** Drops gradients summed so far (after a failed step, before retrying it). */
  resetAccumulation(): void {
    this.accumulator.reset();
  }

  /** Whether the next pass handed to `reduce` is its step's last (backwardPassesPerStep), the one that is reduced. */
  get nextPassEndsStep(): boolean {
    return this.accumulator.nextPassEndsStep;
  }

  /** After the ring re-formed with new members (elastic training): drops what belonged to the old ring. */
  ringReformed(): void {
    this.sum.ringReformed();
  }

  /** This pass's whole gradient: the buckets' values in one flat buffer, or the model's read back. */
  private async readWhole(buckets: readonly GradientBucket[] | undefined): Promise<Float32Array> {
    const waited = now();
    const grads = buckets ? await wholeOf(buckets, this.model.flatLength) : await this.model.readGrads();
    // The read-back is its own span on the timeline, so GPU time is never mistaken for the ring's.
    const ev = this.comm.events;
    if (ev.active)
      ev.emit({ type: 'gpu-wait', t: waited, rank: this.comm.rank, what: 'gradients', ms: now() - waited });
    return grads;
  }

  /** 'gradients' plus a hash of the layout (names, shapes, offsets): equal on ranks that train the same model, so ranks with different models fail negotiation. */
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
  // x * 0 is ±0 for every finite x and NaN otherwise: one pass with no branch per element (about half the time of
  // testing each element: 14 against 28 ms for 10.8M floats under Node 20), then the first culprit is looked for.
  let probe = 0;
  for (let i = 0; i < data.length; i++) probe += data[i] * 0;
  if (probe === 0) return;
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
