/**
 * The text forms of the settings that are spelled as strings (an aggregation
 * rule, a top-k compression ratio). They live with the job settings' schema
 * because a job's settings are checked where collectives may not be imported
 * (the signaling server validates every job it hosts), and one grammar must
 * serve both ends; the collectives re-export them.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export type AggregationRule = 'mean' | 'trimmed-mean' | 'median' | 'centered-clip';
export const AGGREGATION_FORMS = 'mean|trimmed-mean:F|median|centered-clip[:tau]';

export interface Aggregation {
  rule: AggregationRule;
  /** trimmed-mean: the fraction of ranks dropped at EACH end, per element: floor(trim·N) of them. */
  trim: number;
  /** centered-clip: the clipping radius (absent: each round's median deviation norm). */
  tau?: number;
}

export const AGGREGATION_FORMS_EXPLAINED =
  "'mean', 'trimmed-mean:F' (0 <= F < 0.5: the fraction of ranks dropped at each end, per element), 'median' " +
  "or 'centered-clip[:tau]' (each rank's deviation from the previous step's aggregate clipped to length tau > 0; default: the median deviation)";

/** Reads 'mean', 'trimmed-mean:F', 'median' or 'centered-clip[:tau]'. */
export function parseAggregation(spec: string): Aggregation {
  const [rule, arg, ...more] = spec.trim().split(':');
  const bad = (why: string) =>
    new RingtrainError(ErrorCode.InvalidArgument, `aggregation '${spec}': ${why}; use ${AGGREGATION_FORMS_EXPLAINED}`);
  if (more.length) throw bad('too many colons');
  if (rule === 'mean' || rule === 'median') {
    if (arg !== undefined) throw bad(`${rule} takes no value`);
    return { rule, trim: 0 };
  }
  if (rule === 'trimmed-mean') {
    const trim = Number(arg);
    if (arg === undefined || arg === '' || !(trim >= 0 && trim < 0.5))
      throw bad('trimmed-mean needs a fraction F with 0 <= F < 0.5, like trimmed-mean:0.25');
    return { rule, trim };
  }
  if (rule === 'centered-clip') {
    if (arg === undefined) return { rule, trim: 0 };
    const tau = Number(arg);
    if (arg === '' || !(tau > 0 && Number.isFinite(tau)))
      throw bad('centered-clip takes a finite radius tau > 0, like centered-clip:1, or none (the median deviation)');
    return { rule, trim: 0, tau };
  }
  throw bad(`unknown rule '${rule}'`);
}

/** 'topk:R' with 0 < R <= 1: the fraction of elements each rank sends. */
export type TopkCompression = `topk:${string}`;

/** The ratio of a 'topk:R' compression, or null for another kind; throws on a malformed ratio. */
export function topkRatio(compression: string): number | null {
  if (!compression.startsWith('topk:')) return null;
  const text = compression.slice('topk:'.length);
  const r = Number(text);
  if (text.trim() === '' || !(r > 0 && r <= 1)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `compression '${compression}': the top-k ratio must be a number in (0, 1], the fraction of elements each rank sends, e.g. topk:0.01`,
    );
  }
  return r;
}
