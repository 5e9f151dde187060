/**
 * DistributedOptimizer: Horovod's wrapper, over our flat buffers. After each
 * forward/backward the reducer (reduce/gradient-reducer.ts) reads the model's
 * gradients, averages them over every rank, and hands the average to the
 * wrapped optimizer, which applies the update. Because every rank starts from
 * the same weights (broadcastParameters) and applies the same averaged
 * gradient, the weights stay identical on every rank without ever being sent
 * again.
 *
 * This is the facade: the options and what a step does with the gradients
 * are the reducer's (accumulation over backwardPassesPerStep passes, buckets
 * reduced beside backward, compression, the checks, robust aggregation); the
 * update is the wrapped optimizer's.
 */
import type { Communicator } from '../../comm/interface.ts';
import type { Compression } from '../../collectives/codecs/types.ts';
import type { GradientBucket } from '../../engine/grad-buckets.ts';
import type { Model } from '../../engine/model.ts';
import type { Optimizer } from '../../engine/optimizer.ts';
import type { CurrentRing } from '../session/elastic-ring.ts';
import { GradientReducer, type StepResult } from '../reduce/gradient-reducer.ts';
import type { GradientReducerOptions } from '../reduce/settings.ts';

export type { GradientCheck } from '../reduce/gradient-check.ts';
export type { StepResult } from '../reduce/gradient-reducer.ts';
export { reduceSettings } from '../reduce/settings.ts';
export type DistributedOptimizerOptions = GradientReducerOptions;

export class DistributedOptimizer {
  /** What turns this rank's gradients into the ring's reduced gradient. */
  readonly reducer: GradientReducer;

  constructor(
    ring: Communicator | CurrentRing,
    readonly model: Model,
    readonly optimizer: Optimizer,
    options: DistributedOptimizerOptions = {},
  ) {
    this.reducer = new GradientReducer(ring, model, options);
  }

  get compression(): Compression {
    return this.reducer.settings.compression;
  }

  get backwardPassesPerStep(): number {
    return this.reducer.settings.backwardPassesPerStep;
  }

  get op(): 'average' | 'sum' {
    return this.reducer.settings.op;
  }

  get fusionThresholdBytes(): number {
    return this.reducer.settings.fusionThresholdBytes;
  }

  /** The communicator the next step reduces over (the holder's current one, when built over a session or an elastic ring). */
  get comm(): Communicator {
    return this.reducer.comm;
  }

  /** After the ring re-formed with new members (elastic training): drops what belonged to the old ring. */
  ringReformed(): void {
    this.reducer.ringReformed();
  }

  /** Bytes per gradient bucket when a step may reduce its gradients as backward finishes them (the reducer's plan); undefined: read them whole. */
  get overlapBucketBytes(): number | undefined {
    return this.reducer.bucketBytes;
  }

  /**
   * Call after model.forwardBackward() (or with the buckets of model.forwardBackwardBuckets(),
   * sized by `overlapBucketBytes`: then each bucket's reduction starts as soon as it is read back).
   * Every backwardPassesPerStep-th call averages the summed gradients over all ranks and steps the
   * optimizer. `weight` scales this rank's gradient before the average (1: every rank counts
   * alike): a rank with more of the step's counted targets weighs more. `trainingStep` is what the
   * checks see as the step (every rank must give the same): the wrapped optimizer's step count unless given.
   */
  step(
    lr?: number,
    weight = 1,
    trainingStep = this.optimizer.stepCount,
    buckets?: readonly GradientBucket[],
  ): Promise<StepResult> {
    return this.reducer.reduce({ weight, step: trainingStep, buckets }, (reduced) => {
      this.model.writeGrads(reduced);
      this.optimizer.step(lr);
    });
  }

  /** Drops gradients summed so far (after a failed step, before retrying it). */
  resetAccumulation(): void {
    this.reducer.resetAccumulation();
  }
}
