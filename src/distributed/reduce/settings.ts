/**
 * What a gradient reducer is told: how the ranks' gradients are combined and
 * sent, and what runs around the sum. `reduceSettings` fills in the defaults
 * and refuses bad values once, for this library's reducer and for
 * `ringtrain/tfjs`'s optimizer alike.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { DEFAULT_FUSION_THRESHOLD_BYTES } from '../../collectives/fusion.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import type { Compression, ReduceOp } from '../../collectives/codecs/types.ts';
import type { GradientCheck } from './gradient-check.ts';

export interface GradientReducerOptions {
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
   * gradient first (overlap-plan.ts). Default true. Every rank must give the same: it decides
   * which collectives a step runs.
   */
  overlap?: boolean;
  /** A rank silent this long fails the step (ms). */
  timeoutMs?: number;
  /** Checks around every gradient allreduce, run in this order (the contribution guard and the verified allreduce: step-checks.ts). */
  checks?: readonly GradientCheck[];
  /**
   * How contributions are combined: the mean (default, the ring allreduce) or a coordinate-wise
   * robust rule (median, trimmed mean, centered clipping: src/collectives/robust/robust-aggregate.ts). Lossless only.
   */
  aggregation?: Aggregation;
}

/** The options every reducer reads, with the defaults filled in. */
export interface ReduceSettings {
  compression: Compression;
  backwardPassesPerStep: number;
  op: 'average' | 'sum';
  fusionThresholdBytes: number;
  timeoutMs: number | undefined;
}

/** GradientReducerOptions with the defaults filled in and checked: this library's reducer's and the TF.js optimizer's. */
export function reduceSettings(options: GradientReducerOptions): ReduceSettings {
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
