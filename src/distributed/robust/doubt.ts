/**
 * The doubt rule: a contribution that is both much larger than the others'
 * and points against their consensus is left out of that step's sum, and a
 * rank whose contribution is doubtful at `namedAfter` steps in a row is named.
 *
 * Per step and rank r, from the gathered sketches and exact norms (the same
 * numbers on every rank, so every rank reaches the same verdict):
 *
 *   cosine_r    = cos(S(g_r), m_r)     m_r: coordinate-wise median of the OTHER ranks' sketches
 *   normRatio_r = |g_r| / max(median over the other ranks of |g_q|, median of their recent average norms)
 *
 * Both are bounded per step in what they let one honest spike do: the cosine
 * lies in [-1, 1] however large the spike, and a rank is judged only on runs
 * of steps, not on a sum a single step can dominate (the 5-step pull summed
 * -27 from one honest hard example at 96x the median, see docs/ROBUSTNESS.md).
 *
 * A contribution over `clipRatio` (2) times the others' median norm that is
 * not doubtful is summed scaled down to that, so a large rank's harm is
 * bounded whatever its direction: at 8 examples per rank a flipped gradient
 * often points across the others rather than against them, and summed at 6x
 * it collapsed a CNN in two steps (bench/faults-cnn.ts). The others' median
 * is taken at the last step judged before this one (`clipReference`): every
 * rank knows it before it sends, so a clipped rank sends its contribution
 * clipped and nobody waits for this step's norms (issue 37's two-round step).
 * At a ring's first step there is none, and this step's is used: the caller
 * then learns a factor only after the sum, and sums again.
 *
 * A gradient sign-flipped and scaled by 20 while the honest ranks agree
 * (early in training, when the harm is largest) has a cosine near minus
 * the honest one and a ratio near 20: doubtful at once. Leaving a doubtful
 * contribution out costs an honest rank one step's examples; naming it needs
 * a run of 4 doubtful steps. At 3, two of eleven whole honest CNN runs at
 * `npm start`'s settings named an honest rank late in training (replayed by
 * bench/doubt-replay.ts); at 4 none of the recorded runs did, and naming a
 * step later adds nothing of the flip to the sum, since its doubtful steps
 * are left out (figures and limits: docs/ROBUSTNESS.md).
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { coordinateMedian, cosine } from '../../collectives/robust/sketch.ts';
import { median } from '../../core/stats.ts';
import type { Offence } from './guard.ts';

/** A contribution at least this many times the others' median norm... */
export const DEFAULT_DOUBT_RATIO = 4;
/** ...whose cosine with their consensus is at most minus this (0: pointing against them at all), is doubtful. */
export const DEFAULT_DOUBT_COSINE = 0;
/** A rank doubtful at this many steps in a row is named. */
export const DEFAULT_NAMED_AFTER = 4;
/** A contribution over this many times the others' median norm this step that is not doubtful is summed scaled down to it. */
export const DEFAULT_CLIP_RATIO = 2;
/** With two ranks the other's consensus is one gradient: no telling which one is wrong. */
export const MIN_RANKS_FOR_DOUBT = 3;

export interface DoubtOptions {
  /** Smallest norm ratio (over the others' median) of a doubtful contribution. Default DEFAULT_DOUBT_RATIO. */
  ratio?: number;
  /** A doubtful contribution's cosine with the others' consensus is at most -cosine. Default DEFAULT_DOUBT_COSINE. */
  cosine?: number;
  /** Doubtful steps in a row that name a rank. Default DEFAULT_NAMED_AFTER. */
  namedAfter?: number;
  /** A contribution over this many times the others' median norm this step that is not doubtful is summed scaled down to it. Default DEFAULT_CLIP_RATIO. */
  clipRatio?: number;
}

export interface DoubtStats {
  /** |g_r| over the larger of the other ranks' median norm now and the median of their recent averages. */
  normRatio: number;
  /** |g_r| over the other ranks' median norm at this step alone (what clipping bounds). */
  nowRatio: number;
  /** Cosine of r's sketch with the coordinate-wise median of the others' sketches. */
  cosine: number;
}

/**
 * Each rank's figures (same answer on every rank for the same gathered numbers). `typical`
 * (optional, per rank): a slow average of each rank's own norm; the norm ratio is then taken
 * against the larger of the others' median norm now and the median of their typical norms.
 * Late in training most batches are learned and the median norm collapses while an honest
 * batch with one hard example stays near 1 (1,100x the median in `npm start`); the others'
 * recent spikes, carried in their averages, keep that ratio honest. One rank cannot move
 * the median of the others' averages, whatever it sends.
 */
export function doubtStats(
  sketches: ArrayLike<number>[],
  norms: ArrayLike<number>,
  typical?: ArrayLike<number>,
): DoubtStats[] {
  return sketches.map((s, r) => {
    const others = sketches.filter((_, q) => q !== r);
    const now = median(Array.from(norms).filter((_, q) => q !== r));
    const recent = typical ? median(Array.from(typical).filter((_, q) => q !== r)) : 0;
    const scale = Math.max(now, recent);
    const ratio = (x: number) => (x > 0 ? norms[r] / x : norms[r] > 0 ? Infinity : 0);
    return {
      normRatio: ratio(scale),
      nowRatio: ratio(now),
      cosine: cosine(s, coordinateMedian(others)),
    };
  });
}

/** Weight of the past in each rank's average norm (about the last 10 steps). */
export const TYPICAL_DECAY = 0.9;

export interface DoubtVerdict {
  /** Ranks whose contribution this step is left out of the sum (doubtful, not yet named). */
  leftOut: { rank: number; reason: string }[];
  /** Ranks doubtful at `namedAfter` steps in a row. */
  named: Offence[];
  /**
   * Ranks at least `ratio` times the others but not doubtful (not against their consensus, or no
   * consensus this step), with the factor that brings their norm down to `ratio` times: summed clipped.
   */
  clipped: { rank: number; factor: number }[];
}

/**
 * Keeps each rank's run of doubtful steps over one ring (a re-formed ring
 * starts afresh). A redone step (same number) replaces its own entry.
 */
export class DoubtTracker {
  readonly ratio: number;
  readonly cosine: number;
  readonly namedAfter: number;
  readonly clipRatio: number;
  /** rank -> the last step judged, the run of doubtful steps ending there, and the run before it. */
  private readonly runs = new Map<number, { step: number; run: number; before: number }>();
  /** rank -> a slow average of its norm (before the last step judged: a redone step counts once) and the step it was last moved at. */
  private readonly typical = new Map<number, { value: number; before: number; step: number }>();
  /** Every rank's norm at the last step judged, and at the one judged before it (a redone step reads that one). */
  private norms: { step: number; norms: number[]; before: { step: number; norms: number[] } | null } | null = null;

  constructor(o: DoubtOptions = {}) {
    this.ratio = o.ratio ?? DEFAULT_DOUBT_RATIO;
    this.cosine = o.cosine ?? DEFAULT_DOUBT_COSINE;
    this.namedAfter = o.namedAfter ?? DEFAULT_NAMED_AFTER;
    this.clipRatio = o.clipRatio ?? DEFAULT_CLIP_RATIO;
    if (
      !(this.ratio >= 1) ||
      !(this.cosine >= 0 && this.cosine < 1) ||
      !Number.isInteger(this.namedAfter) ||
      this.namedAfter < 1 ||
      !(this.clipRatio >= 1)
    ) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the doubt rule needs a norm ratio >= 1, a cosine in [0, 1), namedAfter a positive integer and a clip ratio >= 1; got ratio ${this.ratio}, cosine ${this.cosine}, namedAfter ${this.namedAfter}, clipRatio ${this.clipRatio}`,
      );
    }
  }

  /**
   * Per rank, the others' median norm at the last step judged before `step` (what a norm is clipped
   * against); null at a ring's first step, or with fewer ranks than the rule judges.
   */
  clipReference(step: number): number[] | null {
    const last = this.norms?.step === step ? this.norms.before : this.norms;
    if (!last || last.step > step || last.norms.length < MIN_RANKS_FOR_DOUBT) return null;
    return last.norms.map((_, r) => median(last.norms.filter((_, q) => q !== r)));
  }

  /**
   * The factor a rank of `size` whose norm is `norm` sends its contribution at, before anyone knows
   * this step's verdict: its clip against the reference (1 where there is none). Each rank's own,
   * and every rank's in the verdict, so the sum is right unless the verdict leaves someone out.
   */
  clipFactor(step: number, rank: number, norm: number, size: number): number {
    return this.clipWith(size >= MIN_RANKS_FOR_DOUBT ? this.clipReference(step) : null, rank, norm, size);
  }

  /** clipFactor for every rank at once (`norms` by rank), the reference taken once. */
  clipFactors(step: number, norms: ArrayLike<number>): number[] {
    const reference = norms.length >= MIN_RANKS_FOR_DOUBT ? this.clipReference(step) : null;
    return Array.from(norms, (norm, rank) => this.clipWith(reference, rank, norm, norms.length));
  }

  private clipWith(reference: number[] | null, rank: number, norm: number, size: number): number {
    if (!reference || reference.length !== size || !Number.isFinite(norm)) return 1;
    const r = reference[rank];
    return this.clipAt(r > 0 ? norm / r : norm > 0 ? Infinity : 0);
  }

  /** The factor that brings a norm `ratio` times its reference down to clipRatio times it (1 below that). */
  private clipAt(ratio: number): number {
    return ratio > this.clipRatio ? this.clipRatio / ratio : 1;
  }

  /** Judges one step's contributions; every rank gets the same verdict from the same numbers. */
  judge(step: number, sketches: ArrayLike<number>[], norms: ArrayLike<number>): DoubtVerdict {
    if (sketches.length < MIN_RANKS_FOR_DOUBT || !Array.from(norms).every(Number.isFinite))
      return { leftOut: [], named: [], clipped: [] };
    const reference = this.clipReference(step);
    this.recordNorms(step, Array.from(norms));
    const typical = Array.from(norms, (n, rank) => {
      const t = this.typical.get(rank);
      return t === undefined ? n : t.step === step ? t.before : t.value;
    });
    const stats = doubtStats(sketches, norms, typical);
    // typical[rank] is the average before this step (a redone step starts from the same one).
    Array.from(norms).forEach((n, rank) => {
      const before = typical[rank];
      this.typical.set(rank, { value: TYPICAL_DECAY * before + (1 - TYPICAL_DECAY) * n, before, step });
    });
    const doubtful = stats.map((x) => x.normRatio >= this.ratio && x.cosine <= -this.cosine);
    // Most ranks doubtful at once: there is no consensus to doubt them against; the step goes on as it is.
    const trusted = doubtful.filter((d) => !d).length * 2 > sketches.length;
    const verdict: DoubtVerdict = { leftOut: [], named: [], clipped: [] };
    stats.forEach((x, rank) => {
      const prev = this.runs.get(rank);
      const before = !prev ? 0 : prev.step === step ? prev.before : prev.step === step - 1 ? prev.run : 0;
      const run = doubtful[rank] && trusted ? before + 1 : 0;
      this.runs.set(rank, { step, run, before });
      // Large but not doubtful: a flipped rank whose own batch happened to point across the others'
      // reads so too, and 20x noise applied with momentum wrecked a CNN in two steps (bench/faults-cnn.ts).
      if (run === 0) {
        const factor = reference ? this.clipWith(reference, rank, norms[rank], norms.length) : this.clipAt(x.nowRatio);
        if (factor !== 1) verdict.clipped.push({ rank, factor });
        return;
      }
      const figures = `${x.normRatio.toFixed(1)}× the others' median norm, cosine ${x.cosine.toFixed(2)} with their consensus (doubtful: at least ${this.ratio}× and at most -${this.cosine})`;
      if (run >= this.namedAfter)
        verdict.named.push({
          rank,
          reason: `its gradient was large and pointed against the others' at ${run} steps in a row; now ${figures}`,
        });
      else verdict.leftOut.push({ rank, reason: figures });
    });
    return verdict;
  }

  private recordNorms(step: number, norms: number[]): void {
    const before = this.norms?.step === step ? this.norms.before : this.norms;
    this.norms = { step, norms, before: before && { step: before.step, norms: before.norms } };
  }
}
