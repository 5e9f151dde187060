/**
 * The direction rule: a rank whose gradient pulls hard against the others'
 * is named, even when its norm alone looks like an honest small-batch spike.
 *
 * Every rank publishes a sketch of its gradient (src/collectives/robust/sketch.ts).
 * Rank r's consensus m_r is the coordinate-wise median of the OTHER ranks'
 * sketches. (Over all ranks, a wild rank drags the median of each coordinate
 * towards its own side: with 4 ranks a sign-flipped ×20 rank was measured
 * pulling *with* such a consensus.) A rank's alignment is the length of its
 * gradient along m_r, in units of the median gradient norm:
 *
 *   alignment_r = <S(g_r), m_r> / |m_r| / median_q |g_q|
 *
 * An honest rank pulls with the consensus; it can pull against it by at most
 * its own norm ratio, and a heavy-tailed honest spike points mostly elsewhere,
 * so its large norm shows little along m_r; a sign-flipped, scaled gradient pulls against it with
 * (about) its whole scaled length. Measured (bench/gradient-directions.ts,
 * figures in docs/ROBUSTNESS.md) before the limit was chosen.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { coordinateMedian, dot } from '../../collectives/robust/sketch.ts';
import { median } from '../../core/stats.ts';
import type { Offence } from './guard.ts';

/** A rank whose alignments over the window sum below minus this is named. */
export const DEFAULT_DIRECTION_LIMIT = 15;
/** With two ranks the median is their mean: no telling which one is wrong. */
export const MIN_RANKS_FOR_DIRECTION_RULE = 3;

export interface DirectionStats {
  /** |g_r| over the median norm. */
  normRatio: number;
  /** Length along the consensus, in median norms (negative: pulls against it). */
  alignment: number;
}

/** Each rank's figures, from all ranks' sketches and exact norms (same answer on every rank). */
export function directionStats(sketches: ArrayLike<number>[], norms: ArrayLike<number>): DirectionStats[] {
  const finite = Array.from(norms).filter(Number.isFinite);
  const scale = median(finite);
  return sketches.map((s, r) => {
    const m = coordinateMedian(sketches.filter((_, q) => q !== r));
    const mLength = Math.sqrt(dot(m, m));
    return {
      normRatio: scale > 0 ? norms[r] / scale : 0,
      alignment: mLength > 0 && scale > 0 ? dot(s, m) / mLength / scale : 0,
    };
  });
}

/** Steps a rank's record covers. */
export const DEFAULT_DIRECTION_WINDOW = 5;
/** The median of a rank's norm ratios over the window above this names it. */
export const DEFAULT_PERSISTENT_RATIO = 10;

export interface DirectionRuleOptions {
  /** Steps a rank's record covers (default DEFAULT_DIRECTION_WINDOW). */
  window?: number;
  /** Sum of alignments over the window below minus this names a rank (default DEFAULT_DIRECTION_LIMIT). */
  pullLimit?: number;
  /** Median norm ratio over the window above this names a rank (default DEFAULT_PERSISTENT_RATIO). */
  persistentRatio?: number;
}

/**
 * The rules as applied, per ring, over each rank's record of the last
 * `window` steps (steps before it joined count as an ordinary step: ratio 1,
 * no pull). A rank is named when
 *
 *  - its alignments sum below -pullLimit: it pulled hard against the
 *    others' consensus; or
 *  - the median of its norm ratios is above persistentRatio: it was that
 *    much larger than the median rank at most of the recent steps.
 *
 * Why both, and why not one step alone: at small batches honest gradients
 * are often almost orthogonal to the others' consensus, and then a flipped
 * one is too, so one step's alignment often cannot tell (measured: a
 * sign-flipped ×20 MLP rank showed a positive alignment summed over 3 steps
 * in over 10% of windows). Its norm can: scaled by 20 it stays far above the
 * median at most steps, while an honest heavy-tailed rank spikes at a few
 * (the median over the window ignores up to half of them). The figures
 * behind the limits are in docs/ROBUSTNESS.md. Every rank keeps the same
 * record from the same gathered numbers, so all reach the same verdict; a
 * redone step replaces its own entry.
 */
export class DirectionHistory {
  private readonly seen = new Map<number, Map<number, DirectionStats>>();
  readonly window: number;
  readonly pullLimit: number;
  readonly persistentRatio: number;

  constructor(o: DirectionRuleOptions = {}) {
    this.window = o.window ?? DEFAULT_DIRECTION_WINDOW;
    this.pullLimit = o.pullLimit ?? DEFAULT_DIRECTION_LIMIT;
    this.persistentRatio = o.persistentRatio ?? DEFAULT_PERSISTENT_RATIO;
    if (!Number.isInteger(this.window) || this.window < 1 || !(this.pullLimit > 0) || !(this.persistentRatio > 1)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the direction rule needs a window of at least one step, a pull limit > 0 and a persistent ratio > 1; got window ${this.window}, pull limit ${this.pullLimit}, ratio ${this.persistentRatio}`,
      );
    }
  }

  /** Records this step's figures and returns the ranks the rules name. */
  judge(step: number, sketches: ArrayLike<number>[], norms: ArrayLike<number>): Offence[] {
    if (sketches.length < MIN_RANKS_FOR_DIRECTION_RULE || !Array.from(norms).every(Number.isFinite)) return [];
    const out: Offence[] = [];
    directionStats(sketches, norms).forEach((x, rank) => {
      let steps = this.seen.get(rank);
      if (!steps) this.seen.set(rank, (steps = new Map()));
      steps.set(step, x);
      for (const s of steps.keys()) if (s <= step - this.window || s > step) steps.delete(s);
      const record = [...steps.values()];
      const pull = record.reduce((sum, r) => sum + r.alignment, 0);
      const ratios = [...record.map((r) => r.normRatio), ...Array<number>(this.window - record.length).fill(1)];
      const typical = median(ratios);
      const figures = `over the last ${this.window} steps: pull ${pull.toFixed(2)} median norms along the others' consensus, median norm ratio ${typical.toFixed(1)}×; now ${x.normRatio.toFixed(1)}×`;
      if (pull < -this.pullLimit)
        out.push({ rank, reason: `its gradient pulls against the others' (limit -${this.pullLimit}; ${figures})` });
      else if (typical > this.persistentRatio)
        out.push({
          rank,
          reason: `its gradient stays far larger than the others' (limit ${this.persistentRatio}×; ${figures})`,
        });
    });
    return out;
  }
}
