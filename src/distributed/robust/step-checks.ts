/**
 * What every rank checks around a step's gradient allreduce, in one small
 * allgather beside it and (with verification on) one after it:
 *
 * Each rank publishes its gradient's norm and a sketch of its gradient
 * (src/collectives/robust/sketch.ts). From these every rank applies, alike:
 *  - the norm rule (guard.ts): non-finite or far larger than the others';
 *  - the direction rules (direction.ts), over each rank's last few steps:
 *    pulling hard against the others' consensus, or staying far larger than
 *    the median rank at most of them.
 * An offender fails the step on every rank before anything is applied.
 *
 * When no rule changes what a rank sends (the doubt rule's clip and leave-out
 * are off), the sketch allgather and the gradient allreduce run at once, so
 * the checks cost the step no round trip of their own: the verdict is read
 * when the sum is done, and an offender's step is discarded then, on every
 * rank alike. With the doubt rule on, a rank's factor depends on the
 * gathered checks: its clip is known before it sends (doubt.ts clips against
 * the others' norms at the step before), a leave-out only after. With verify
 * (an elastic job's default) the rank keeps a copy of its contribution, so
 * it sends at once at its clip and the allgather runs beside the sum; the
 * rare step whose verdict leaves a rank out (or a ring's first step, which
 * clips against its own norms) is summed again from the copies at the
 * factors the verdict gives, and the first sum is discarded on every rank
 * alike. Without verify there is no copy: the allgather comes first.
 *
 * After summing (verify), each rank keeps a copy of its contribution and of
 * what it sent and received in reduce-scatter; verify-verdicts.ts then shares,
 * in one signed allgather, the hash of the sum it holds, its contribution's
 * per-chunk sketches under a seed the sum reveals, and its signed link
 * digests, and every rank names the same rank or link, or goes on.
 *
 * Both gathers are signed by each block's author and checked as they arrive
 * (signed-gather.ts): a rank that rewrites another's norm or verdict as it
 * passes it on is named for it, and the author is not.
 *
 * Cost per step on a gradient of n floats: one hashing pass over it on the
 * CPU with verify off; with verify, copies of the contribution and of the
 * (size-1)/size of it sent and received, SHA-256 of the sum and of what it
 * sent, and one sketching pass over the contribution, the sum and both
 * (bench/link-digests.ts), and
 * 4·(1 + 256) + 128 bytes per rank beside the sum, 4·(272·chunks) + 128 after
 * it (chunks = ring size), one signature and size-1 verifications per gather.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { sketch, stepSeed } from '../../collectives/robust/sketch.ts';
import { sketchInto } from '../../collectives/robust/sketch.ts';
import { chunkSketches, ringChunks, type RingChunk } from '../../collectives/robust/verified.ts';
import { DirectionHistory, type DirectionRuleOptions } from './direction.ts';
import { DoubtTracker, type DoubtOptions } from './doubt.ts';
import { judgeNorms, l2Norm, rejectOffences, type GuardOptions } from './guard.ts';
import { startSignedAllgather } from '../session/signed-gather.ts';
import { judgeVerifiedStep } from './verify-verdicts.ts';

/** Buckets of the sketch the direction rule compares (cosines to about ±1/16). */
export const DIRECTION_BUCKETS = 256;
/** Buckets per ring chunk of the verified allreduce. */
export const VERIFY_BUCKETS = 64;

export interface StepCheckOptions {
  /** The norm, doubt and direction rules; false turns them all off. */
  guard?: (GuardOptions & { direction?: DirectionRuleOptions | false; doubt?: DoubtOptions | false }) | false;
  /**
   * Whether a doubtful contribution is left out of the step's sum (the others' mean instead).
   * Default true; off for robust aggregation rules, which are not a sum (doubts still name).
   */
  leaveOut?: boolean;
  /** Verify every gradient allreduce against the published sketches (lossless allreduces only). */
  verify?: boolean;
  /** The job's seed: every rank derives the same sketch seed per step from it. */
  seed: number;
  /** The fusion threshold (bytes) the optimizer cuts the gradient by: the verifier follows its chunks. */
  fusionThresholdBytes?: number;
  timeoutMs?: number;
  /** Told of every rank the checks name (a session reports it to the server). */
  misbehaviour?: MisbehaviourSink;
}

interface Pending {
  comm: Communicator;
  step: number;
  chunks: RingChunk[];
  /** Every rank's published checks, gathered (judged in `after` when they travelled beside the sum). */
  gathered: Promise<Float32Array>;
  /** Judges the gathered checks: each rank's factor, or throws naming the offenders. */
  judge: (gathered: Float32Array) => number[];
  /** Sent before the verdict (verify's copy allows it): each rank's factor is its clip, which every rank can tell after. */
  speculative: boolean;
  /** Set by `judge` on a speculative step: the factor each rank sent at. */
  sent: number[] | null;
  /** Each rank's factor (set once judged): what it really sends is its contribution times it. */
  factors: number[] | null;
  /** What this rank received and sent in reduce-scatter, where it lies in the gradient (verify; digested in `after`). */
  link: LinkCopies | null;
}

/** Copies of a step's contribution and reduce-scatter traffic on this rank, kept for the checks after the sum. */
interface LinkCopies {
  /** The contribution as its checks saw it (sketched only once the sum reveals the seed). */
  contribution: Float32Array;
  sent: Float32Array;
  received: Float32Array;
}

type Guard = Exclude<StepCheckOptions['guard'], false | undefined>;

export class StepChecks {
  private pending: Pending | null = null;
  /** The last step's allgather: the next one (same name) starts only once it is over. */
  private gathering: Promise<unknown> | null = null;
  private history = new WeakMap<Communicator, DirectionHistory>();
  private doubts = new WeakMap<Communicator, DoubtTracker>();
  private copies: LinkCopies | null = null;
  /** A step summed again: this rank's contribution at the verdict's factor (one buffer for the run). */
  private again: Float32Array | null = null;

  constructor(private readonly o: StepCheckOptions) {}

  /**
   * Whether `before` leaves the contribution as it is (its factor is always 1): so whenever the
   * doubt rule does not decide factors. With verify it reads the ring chunks of the whole buffer,
   * so the reducer reduces the whole buffer then anyway (reduce/overlap-plan.ts).
   */
  get readsOnly(): boolean {
    const guard = this.o.guard ?? {};
    return guard === false || guard.doubt === false || this.o.leaveOut === false;
  }

  /**
   * Before the allreduce: publishes this rank's checks and resolves to the factor its
   * contribution is to be multiplied by before it is summed. Where no rule can change that
   * factor (the doubt rule off, or summing doubtful ranks anyway) it resolves to 1 at once,
   * with the allgather still in flight beside the allreduce, and `after` throws naming any
   * offender. With the doubt rule deciding factors it waits for the gathered checks: it throws
   * naming offenders, or resolves to 0 when this rank is left out of this step,
   * ratio/normRatio when it is large but not doubtful (clipped to `ratio` times the others',
   * doubt.ts), times N/(N-k) when k ranks are left out (so the average over the ring is the
   * mean of the contributions kept), else 1.
   */
  async before(comm: Communicator, local: Float32Array, step: number): Promise<number> {
    this.pending = null;
    const guard = this.o.guard ?? {};
    if (guard === false && !this.o.verify) return 1;
    const directionBuckets = this.directionBuckets;
    const mine = new Float32Array(1 + directionBuckets);
    mine[0] = l2Norm(local);
    if (directionBuckets) mine.set(sketch(local, directionBuckets, stepSeed(this.o.seed, step)), 1);
    return this.publish(comm, step, mine, local);
  }

  /** The sketch's length: 0 when no rule compares directions. */
  private get directionBuckets(): number {
    const guard = this.o.guard ?? {};
    return guard === false || (guard.direction === false && guard.doubt === false) ? 0 : DIRECTION_BUCKETS;
  }

  /**
   * `before` from the buckets as they are read back, where the checks need only the contribution's
   * norm and sketch (no verify, no factor): both are sums over its values, kept as they go, so the
   * reducer needs no copy of the whole contribution (498 MB at GPT-2's size). The sums add in the
   * buckets' read order, so the published figures may differ from `before`'s in their last bits;
   * every rule compares them with margins far wider than that.
   */
  digest(
    step: number,
  ): { add(offset: number, values: Float32Array): void; finish(comm: Communicator): Promise<void> } | undefined {
    if (this.o.verify || !this.readsOnly) return undefined;
    const buckets = this.directionBuckets;
    const seed = stepSeed(this.o.seed, step);
    const sketched = new Float64Array(buckets);
    let squares = 0;
    return {
      add: (offset, values) => {
        for (let i = 0; i < values.length; i++) squares += values[i] * values[i];
        if (buckets) sketchInto(sketched, values, seed, offset);
      },
      finish: async (comm) => {
        this.pending = null;
        if (this.o.guard === false) return;
        const mine = new Float32Array(1 + buckets);
        mine[0] = Math.sqrt(squares);
        mine.set(sketched, 1);
        await this.publish(comm, step, mine, null);
      },
    };
  }

  /** Starts the signed gather of this rank's checks (`mine`: norm, then sketch) and resolves to its factor. */
  private async publish(comm: Communicator, step: number, mine: Float32Array, local: Float32Array | null) {
    const guard = this.o.guard ?? {};
    const directionBuckets = mine.length - 1;
    // A step that failed before its `after` may have left its allgather running: two of one name may not overlap.
    if (this.gathering) await this.gathering;
    // An observed allreduce goes round the ring at any size (chooseAlgorithm): no recursive-doubling or halving-doubling
    // pieces.
    const chunks = this.o.verify && local ? ringChunks(local.length, comm.size, this.o.fusionThresholdBytes, 0, 0) : [];
    // Begun (signed) before this returns: it runs beside the allreduce the caller starts next.
    const { gathered } = await startSignedAllgather(comm, mine, {
      name: 'gradient-sketches',
      step,
      timeoutMs: this.o.timeoutMs,
      misbehaviour: this.o.misbehaviour,
    });
    const gathering = gathered.then(
      () => {},
      () => {},
    );
    this.gathering = gathering;
    void gathering.then(() => {
      if (this.gathering === gathering) this.gathering = null;
    });
    const link = chunks.length && local ? this.linkCopies(local) : null;
    const decides = guard !== false && guard.doubt !== false && this.o.leaveOut !== false;
    const pending: Pending = {
      comm,
      step,
      chunks,
      gathered,
      factors: null,
      link,
      speculative: decides && link !== null,
      sent: null,
      judge: (all) => this.judge(comm, guard, all, mine.length, directionBuckets, pending),
    };
    if (pending.speculative) {
      // Seen by `after`, which sums again should the verdict's factors not be those sent at.
      gathered.catch(() => {});
      this.pending = pending;
      return this.doubtsOf(comm, guard).clipFactor(step, comm.rank, mine[0], comm.size);
    }
    if (decides) {
      const factors = pending.judge(await gathered);
      pending.judge = () => factors;
      if (chunks.length) this.pending = pending;
      return factors[comm.rank];
    }
    // Seen by `after`; a step that fails before it has its own error to report.
    gathered.catch(() => {});
    this.pending = pending;
    return 1;
  }

  /** The rules over every rank's gathered checks: each rank's factor, or throws naming offenders (on every rank alike). */
  private judge(
    comm: Communicator,
    guard: Guard | false,
    gathered: Float32Array,
    length: number,
    directionBuckets: number,
    p: Pending,
  ): number[] {
    const step = p.step;
    if (gathered.length !== length * comm.size) {
      throw new RingtrainError(
        ErrorCode.Mismatch,
        `the ranks published sketches of different lengths (${gathered.length} numbers from ${comm.size} ranks, ${length} here): their guard or --verify settings differ`,
      );
    }
    const block = (r: number, from: number, count: number) =>
      gathered.subarray(r * length + from, r * length + from + count);
    const ranks = Array.from({ length: comm.size }, (_, r) => r);
    const factors = ranks.map(() => 1);
    if (guard !== false) {
      const norms = Float32Array.from(ranks, (r) => gathered[r * length]);
      const sketches = ranks.map((r) => block(r, 1, directionBuckets));
      const offences = judgeNorms(comm, norms, step, guard);
      if (offences.length === 0 && guard.doubt !== false) {
        const doubts = this.doubtsOf(comm, guard);
        if (p.speculative) p.sent = doubts.clipFactors(step, norms);
        const verdict = doubts.judge(step, sketches, norms);
        offences.push(...verdict.named);
        if (verdict.named.length === 0 && this.o.leaveOut !== false) {
          for (const { rank, factor } of verdict.clipped) factors[rank] = factor;
          if (verdict.leftOut.length > 0) {
            for (const { rank } of verdict.leftOut) factors[rank] = 0;
            const kept = comm.size - verdict.leftOut.length;
            for (const r of ranks) if (factors[r] !== 0) factors[r] *= comm.size / kept;
          }
        }
        for (const { rank, reason } of verdict.leftOut) {
          if (comm.events.active)
            comm.events.emit({
              type: 'contribution-left-out',
              t: now(),
              rank: comm.rank,
              peer: rank,
              step,
              reason: this.o.leaveOut === false ? `doubtful, summed (robust aggregation): ${reason}` : reason,
            });
        }
      }
      if (offences.length === 0 && guard.direction !== false) {
        let history = this.history.get(comm);
        if (!history) this.history.set(comm, (history = new DirectionHistory(guard.direction)));
        offences.push(...history.judge(step, sketches, norms));
      }
      rejectOffences(comm, step, offences, norms, this.o.misbehaviour);
    }
    p.factors = factors;
    return factors;
  }

  private doubtsOf(comm: Communicator, guard: Guard | false): DoubtTracker {
    let doubts = this.doubts.get(comm);
    if (!doubts) this.doubts.set(comm, (doubts = new DoubtTracker(guard === false ? {} : guard.doubt || {})));
    return doubts;
  }

  /**
   * During the allreduce (verify): a segment this rank received in reduce-scatter. A copy is kept:
   * after the sum its hash and sketch go into this rank's signed link digest (link-digests.ts), and
   * its bytes are the evidence should the sender's digest and this rank's disagree.
   */
  observe(comm: Communicator, offset: number, values: Float32Array): void {
    const p = this.pending;
    // A fast path that fell back sends the same offsets again: the last one is what was reduced.
    if (p?.comm === comm) p.link?.received.set(values, offset);
  }

  /** During the allreduce (verify): a segment this rank sends in reduce-scatter, kept for its signed link digest. */
  observeSent(comm: Communicator, offset: number, values: Float32Array): void {
    const p = this.pending;
    if (p?.comm === comm) p.link?.sent.set(values, offset);
  }

  /** One set of copies for every step (each step overwrites them), with `local` as this step's contribution. */
  private linkCopies(local: Float32Array): LinkCopies {
    const length = local.length;
    if (this.copies?.sent.length !== length)
      this.copies = {
        contribution: new Float32Array(length),
        sent: new Float32Array(length),
        received: new Float32Array(length),
      };
    this.copies.contribution.set(local);
    return this.copies;
  }

  /**
   * After the allreduce, before its update is applied: throws ERR_PEER_MISBEHAVED naming
   * the offenders the gathered checks found (when they were gathered beside the sum).
   * With verify, `reduced` should then be scale × the sum of the contributions checked:
   * throws ERR_PEER_MISBEHAVED naming the link that changed it, on every rank alike.
   * Resolves to `{ again }` when the verdict's factors are not those the ranks sent at (a
   * speculative step, see the file's head): the sum is to be taken again with `again` as this
   * rank's contribution, and `after` called on that sum.
   */
  async after(
    comm: Communicator,
    reduced: Float32Array,
    scale: number,
    prescale = 1,
  ): Promise<{ again: Float32Array } | void> {
    const p = this.pending;
    this.pending = null;
    if (!p || p.comm !== comm) return;
    // An offender in the gathered checks fails the step here, on every rank alike: its sum is discarded.
    // Judged only now, so that naming it (which asks the server to eject it) and failing the step
    // happen together, before an ejection can break the ring under a step still running.
    const factors = p.judge(await p.gathered);
    p.judge = () => factors;
    if (p.sent && p.link && p.sent.some((f, r) => f !== factors[r])) {
      // Every rank judged the same numbers: all sum again, each from its copy, at the verdict's factors.
      p.sent = null;
      this.pending = p;
      const contribution = p.link.contribution;
      if (this.again?.length !== contribution.length) this.again = new Float32Array(contribution.length);
      const f = factors[comm.rank];
      for (let i = 0; i < contribution.length; i++) this.again[i] = contribution[i] * f;
      return { again: this.again };
    }
    const link = p.link;
    if (!link || !p.factors) return;
    await judgeVerifiedStep(
      {
        comm,
        step: p.step,
        chunks: p.chunks,
        k: VERIFY_BUCKETS,
        contribution: link.contribution,
        factors: p.factors,
        sent: link.sent,
        received: link.received,
        timeoutMs: this.o.timeoutMs,
        misbehaviour: this.o.misbehaviour,
      },
      reduced,
      scale,
      prescale,
    );
  }
}
