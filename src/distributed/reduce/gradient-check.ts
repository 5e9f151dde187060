/**
 * The checks around the gradient allreduce, as the reducer runs them: each
 * check's `before` on this rank's contribution (a factor it resolves to scales
 * the contribution), `observe` on the segments the ring brings in, `after` on
 * the reduced gradient. On the bucket path (overlap.ts) the checks that only
 * read see a copy of the whole contribution, so the buckets read before them
 * are already being reduced.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';

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
  /** Sees every segment this rank sends in reduce-scatter (ReduceOptions.observeSent): the verified allreduce signs a digest of them. */
  observeSent?(comm: Communicator, offset: number, values: Float32Array): void;
  /**
   * Runs on the reduced gradients before they are checked and applied (the checks gathered beside
   * the sum, and the verified allreduce: step-checks.ts), with the factor between them and the
   * plain sum of the contributions `before` saw; throwing fails the step before any update.
   * Resolving to `{ again }` discards this sum: the step is summed once more with `again` as this
   * rank's contribution (a check that sent before its verdict and learnt a factor after it, on
   * every rank alike), and every check's `after` runs on that sum.
   */
  after?(comm: Communicator, reduced: Float32Array, scale: number, prescale: number): Promise<SumAgain | void>;
  /**
   * A check that only reads and needs no more of the contribution than running sums over it (a
   * norm, a sketch) may take it bucket by bucket as the buckets are read back, instead of a copy of
   * the whole: this step's digest, whose `finish` then stands for `before`; undefined where this
   * step needs the values themselves.
   */
  digest?(step: number): ContributionDigest | undefined;
}

/** A check's answer that the sum is to be taken again, with this rank's contribution `again`. */
export interface SumAgain {
  again: Float32Array;
}

/** A check's running view of one step's contribution (GradientCheck.digest). */
export interface ContributionDigest {
  /** One bucket of the contribution as read back (weighted), before its sum overwrites it; buckets come in read order. */
  add(offset: number, values: Float32Array): void;
  /** Once every bucket is in: what `before` would do, from the digest. */
  finish(comm: Communicator): Promise<void> | void;
}

/** The checks' part in a step whose buckets are reduced as they are read (overlap.ts's BucketReduction). */
export interface BucketChecks {
  /** Whether buckets are reduced as they are read: no check here changes the contribution. */
  overlap: boolean;
  /** Overlapping, where the checks' copy of the contribution is gathered (null: none reads it). */
  local: Float32Array | null;
  /** Overlapping, hands each bucket as read to the checks that keep a digest instead of reading the copy. */
  digestBucket?: (offset: number, values: Float32Array) => void;
  prepare(): Promise<void>;
  beforeLast(): Promise<void>;
}

export class CheckPipeline {
  /** Hands each segment the ring receives to the checks that observe (undefined: none does, nothing is hashed on the way). */
  readonly observeReceived: ((offset: number, values: Float32Array) => void) | undefined;
  /** Hands each segment the ring sends in reduce-scatter to the checks that observe them (undefined: none does). */
  readonly observeSent: ((offset: number, values: Float32Array) => void) | undefined;
  /**
   * The bucket path's copy of the contribution for the checks that only read: one for the whole
   * run (every step overwrites all of it), not one the size of the gradient a step.
   */
  private copy: Float32Array | null = null;

  constructor(
    readonly checks: readonly GradientCheck[],
    comm: () => Communicator,
  ) {
    const observers = checks.filter((c) => c.observe);
    this.observeReceived =
      observers.length > 0
        ? (offset, values) => observers.forEach((c) => c.observe!(comm(), offset, values))
        : undefined;
    const senders = checks.filter((c) => c.observeSent);
    this.observeSent =
      senders.length > 0
        ? (offset, values) => senders.forEach((c) => c.observeSent!(comm(), offset, values))
        : undefined;
  }

  /** A check may change the contribution in a way every rank must know of before anyone sends (the doubt rule's factors). */
  get changesForAll(): boolean {
    return this.checks.some((c) => c.before && !c.readsOnly && !c.rankLocal);
  }

  /** Every `before` in order on the whole contribution, then the product of their factors applied to it. */
  async before(comm: Communicator, local: Float32Array, step: number): Promise<void> {
    let factor = 1;
    for (const check of this.checks) {
      const f = await check.before?.(comm, local, step);
      if (typeof f === 'number') factor *= f;
    }
    if (factor !== 1) for (let i = 0; i < local.length; i++) local[i] *= factor;
  }

  /** Every check's `after` in order; the first that asks for the sum again ends the round (the later ones judge the next sum). */
  async after(comm: Communicator, reduced: Float32Array, scale: number, prescale: number): Promise<SumAgain | void> {
    for (const check of this.checks) {
      const answer = await check.after?.(comm, reduced, scale, prescale);
      if (answer) return answer;
    }
  }

  /**
   * The checks on the bucket path. Those that only read see a copy of the contribution once every
   * bucket is read; on a rank with a check that changes it (a caller's transform) every bucket is
   * read first, and each reading check sees the contribution as the checks before it in the list
   * left it, as on the whole-gradient path.
   */
  forBuckets(comm: Communicator, flat: Float32Array, step: number): BucketChecks {
    const hooked = this.checks.filter((c) => c.before);
    const overlap = hooked.every((c) => c.readsOnly);
    const digests = overlap ? hooked.map((c) => c.digest?.(step)) : [];
    // Overlapping, the sums overwrite `flat` while later buckets are read: the checks that need the values read a copy.
    const copied = overlap && digests.some((d) => !d);
    if (copied && this.copy?.length !== flat.length) this.copy = new Float32Array(flat.length);
    if (!copied) this.copy = null;
    const local = copied ? this.copy : null;
    const readers: { check: GradientCheck; local: Float32Array; digest?: ContributionDigest }[] = overlap
      ? hooked.map((check, i) => ({ check, local: local!, digest: digests[i] }))
      : [];
    const digesting = digests.filter((d) => d !== undefined);
    const digestBucket =
      digesting.length > 0
        ? (offset: number, values: Float32Array) => digesting.forEach((d) => d.add(offset, values))
        : undefined;
    const prepare = async () => {
      let factor = 1;
      let seen: Float32Array | null = null;
      for (const check of hooked) {
        if (check.readsOnly) {
          readers.push({ check, local: (seen ??= flat.slice()) });
          continue;
        }
        const f = await check.before!(comm, flat, step);
        if (typeof f === 'number') factor *= f;
        seen = null;
      }
      if (factor !== 1) for (let i = 0; i < flat.length; i++) flat[i] *= factor;
    };
    const beforeLast = async () => {
      for (const { check, local, digest } of readers) {
        if (digest) {
          await digest.finish(comm);
          continue;
        }
        const f = await check.before!(comm, local, step);
        if (typeof f === 'number' && f !== 1)
          throw new RingtrainError(
            ErrorCode.InvalidArgument,
            `a gradient check that said it only reads resolved to the factor ${f}; give it readsOnly: false`,
          );
      }
    };
    return { overlap, local, digestBucket, prepare, beforeLast };
  }
}
