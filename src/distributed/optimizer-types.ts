/**
 * What DistributedOptimizer (optimizer.ts) takes: its options and the checks
 * run around each gradient allreduce. Types only, so the ring (elastic-ring.ts)
 * and the trainers' settings name them without importing the optimizer.
 */
import type { Communicator } from '../comm/interface.ts';
import type { Compression, ReduceOp } from '../collectives/types.ts';
import type { Aggregation } from '../collectives/robust-aggregate.ts';

export interface DistributedOptimizerOptions {
  /** 'fp16' sends gradients as float16 (half the bytes), 'int8' as bytes with error feedback (a quarter). Default 'none'. */
  compression?: Compression;
  /** Local passes whose gradients are summed before one allreduce. Default 1. */
  backwardPassesPerStep?: number;
  /** 'average' (default) or 'sum' over ranks. */
  op?: Extract<ReduceOp, 'average' | 'sum'>;
  /** Fusion buffer size in bytes; tensors beyond it go in further collectives. */
  fusionThresholdBytes?: number;
  /**
   * Reduce each gradient bucket as soon as backward finishes it, where nothing needs the whole
   * gradient first (overlapBucketBytes). Default true. Every rank must give the same: it decides
   * which collectives a step runs.
   */
  overlap?: boolean;
  /** A rank silent this long fails the step (ms). */
  timeoutMs?: number;
  /** Checks around every gradient allreduce, run in this order (the contribution guard and the verified allreduce: step-checks.ts). */
  checks?: readonly GradientCheck[];
  /**
   * How contributions are combined: the mean (default, the ring allreduce) or a coordinate-wise
   * robust rule (median, trimmed mean, centered clipping: src/collectives/robust-aggregate.ts). Lossless only.
   */
  aggregation?: Aggregation;
}

/**
 * A check around the gradient allreduce; every part is optional. StepChecks (step-checks.ts)
 * is one: the contribution guard and the verified allreduce.
 */
export interface GradientCheck {
  /**
   * Runs on this rank's contribution just before the allreduce; throwing fails the step before
   * anything was summed or applied. A number it resolves to multiplies this rank's contribution
   * before the sum (0: left out this step), once every check's `before` has run. A check that
   * needs no factor may resolve at once and judge in `after`, its own collective running beside
   * the allreduce (step-checks.ts).
   */
  before?(comm: Communicator, local: Float32Array, step: number): Promise<number | void> | number | void;
  /**
   * True when `before` only reads: it changes no value of `local` and resolves to no factor but 1.
   * Such a check may run once the whole gradient is read back, on a copy, while the buckets read
   * before are already being reduced (overlap.ts); one without it turns the overlap off.
   */
  readsOnly?: boolean;
  /**
   * True when `before` may change this rank's contribution, but on this rank alone (a caller's
   * transform, which other ranks need not know of): the step is still cut into the same buckets as
   * on every other rank, and this rank reads them all before reducing any. A check with neither
   * flag (the doubt rule, whose factors every rank must know before anyone sends) keeps every
   * rank's gradient whole.
   */
  rankLocal?: boolean;
  /** Sees every segment this rank receives in the ring's reduce-scatter (ReduceOptions.observeReceived): the verified allreduce checks each hop. */
  observe?(comm: Communicator, offset: number, values: Float32Array): void;
  /**
   * Runs on the reduced gradients before they are checked and applied (the checks gathered beside
   * the sum, and the verified allreduce: step-checks.ts), with the factor between them and the
   * plain sum of the contributions `before` saw; throwing fails the step before any update.
   */
  after?(comm: Communicator, reduced: Float32Array, scale: number, prescale: number): Promise<void>;
}
