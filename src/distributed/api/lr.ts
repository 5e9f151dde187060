/**
 * Learning-rate scaling for data-parallel training. With N peers each taking
 * a batch of B, one step sees N·B samples, so the usual recipe (Goyal et al.,
 * "Accurate, Large Minibatch SGD") scales the single-peer learning rate by N
 * and ramps up to it linearly over a warm-up, because the scaled rate is too
 * large for the first steps of a fresh model.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

export interface LrSchedule {
  /** The learning rate one peer would use at batch B. */
  baseLr: number;
  /** Number of peers; the target rate is baseLr × size. */
  size: number;
  /** Steps of linear warm-up from baseLr to baseLr × size; 0 for none. */
  warmupSteps?: number;
  /**
   * 'zero': the warm-up ramps from 0 instead, step s at target × (s + 1) / warmupSteps
   * (the usual transformer recipe, and the PyTorch reference's for the words workload).
   */
  warmupFrom?: 'base' | 'zero';
  /** Scale by size at all (Horovod users turn it off for Adam-like optimizers). */
  scaleBySize?: boolean;
  /**
   * 'cosine' anneals the rate to zero over `totalSteps` after the warm-up, so the
   * last epochs settle instead of bouncing around a minimum. Default 'constant'.
   */
  decay?: 'constant' | 'cosine';
  totalSteps?: number;
}

export function validateLrSchedule(s: LrSchedule): void {
  if (!Number.isFinite(s.baseLr) || s.baseLr <= 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `learning rate must be a positive number, got ${s.baseLr}; pass e.g. --lr 0.01`,
    );
  }
  if (!Number.isInteger(s.size) || s.size < 1) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `size must be a positive integer, got ${s.size}`);
  }
  const w = s.warmupSteps ?? 0;
  if (!Number.isInteger(w) || w < 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `warm-up steps must be a non-negative integer, got ${w}`);
  }
}

/** The learning rate for `step` (0-based). */
export function learningRateAt(s: LrSchedule, step: number): number {
  validateLrSchedule(s);
  const target = s.scaleBySize === false ? s.baseLr : s.baseLr * s.size;
  const w = s.warmupSteps ?? 0;
  if (w > 0 && step < w)
    return s.warmupFrom === 'zero' ? (target * (step + 1)) / w : s.baseLr + (target - s.baseLr) * (step / w);
  if (s.decay !== 'cosine') return target;
  const total = s.totalSteps ?? 0;
  if (!Number.isFinite(total) || total <= w) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cosine decay needs the total number of steps (more than the ${w} warm-up steps), got ${total}`,
    );
  }
  const progress = Math.min(1, (step - w) / (total - w));
  return target * 0.5 * (1 + Math.cos(Math.PI * progress));
}
