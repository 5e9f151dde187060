/**
 * --precision f16-mixed for a trainer's model, alone or in a ring. In a ring every rank trains at the
 * job's precision (job-config.ts) unless the job lets peers mix precisions (`mixPrecisions`); ranks at
 * different precisions are refused otherwise, before any step. Each bucket of gradients leaves its rank
 * unscaled (GraphModel's bucket path; the whole-gradient path unscales after backward), and the ranks
 * agree on each step's overflow before any update: a step that overflowed on any rank is skipped by
 * every rank, and every rank's loss scale moves alike, so the replicas stay one.
 */
import type { Communicator } from '../../comm/interface.ts';
import { allreduce } from '../../collectives/allreduce.ts';
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import type { Model } from '../../engine/model.ts';

export type Precision = 'f32' | 'f16-mixed';

/** What a rank's ring needs to know of the precisions: its own, and whether the job lets peers differ. */
export interface RingPrecision {
  precision?: Precision;
  mixPrecisions?: boolean;
}

const AT = ' at precision ';

/**
 * The precision a peer trains a job at: the job's, or the one it asks for (`worker --precision`) where the job lets
 * peers mix precisions. Asking for another in a job that does not is refused, before the peer joins the ring.
 */
export function peerPrecision(
  jobId: string,
  job: { precision: Precision; mixPrecisions: boolean },
  asked: Precision | undefined,
): Precision {
  if (asked === undefined || asked === job.precision) return job.precision;
  if (job.mixPrecisions) return asked;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `job ${jobId} trains at precision ${job.precision} and lets no peer mix precisions, but this worker was started with --precision ${asked}; drop --precision to train at the job's, or start the job letting peers mix them (run --mix-precisions, job setting mixPrecisions: true)`,
    { precision: asked, jobPrecision: job.precision },
  );
}

/** Trains `model` in f16-mixed from now on (before its first plan), where the model has it. */
export function useMixedPrecision(model: Model): void {
  if (!model.useMixedPrecision)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--precision f16-mixed: model ${model.kind} cannot train in mixed precision; use --precision f32`,
      { precision: 'f16-mixed', model: model.kind },
    );
  model.useMixedPrecision();
}

/**
 * A ring rank's overflow, agreed once a step, before its reduction. A step of several backward passes
 * (backwardPassesPerStep) overflowed when any pass did on any rank: this rank's flag is read after each
 * pass (the next pass clears it) and kept until the step's last pass, where the ranks sum it (one number)
 * and every rank settles its loss scale alike, so S moves once a step whichever pass overflowed, and the
 * skipped steps are steps, not passes. Nothing at all in f32.
 */
export class RingOverflow {
  /** Whether an earlier pass of this step overflowed on this rank. */
  private earlierPass = false;

  /** `mixed`: the job lets peers mix precisions, so an f32 rank joins the sum too (with 0) and skips alike. */
  constructor(
    private readonly model: Model,
    private readonly mixed: boolean,
  ) {}

  /** After a pass's forward-backward (`lastPass`: the one that ends its step): the scale it ran with, and whether the step is skipped. */
  async agree(
    comm: Communicator,
    lastPass: boolean,
    timeoutMs?: number,
  ): Promise<{ lossScale: number; skipped: boolean } | undefined> {
    const scaler = this.model.lossScaler;
    if (!scaler && !this.mixed) return undefined;
    // An f32 rank scales nothing (S = 1) and never overflows f16; in a mixed ring it skips what the others skip.
    const lossScale = scaler?.scale ?? 1;
    // One GPU wait, spared once a pass of the step has overflowed (its gradient read-back waits anyway).
    const overflowed = this.earlierPass || ((await scaler?.readOverflow()) ?? false);
    if (!lastPass) {
      this.earlierPass = overflowed;
      return { lossScale, skipped: false };
    }
    this.earlierPass = false;
    const [ranks] = await allreduce(comm, Float32Array.of(overflowed ? 1 : 0), {
      op: 'sum',
      name: 'f16-overflow',
      timeoutMs,
    });
    return { lossScale, skipped: scaler ? !scaler.settle(ranks > 0) : ranks > 0 };
  }

  /** Forgets the passes taken so far (the ring re-formed: the step's passes are taken again). */
  reset(): void {
    this.earlierPass = false;
  }
}

/**
 * The name of the collective a ring starts (and re-starts) with, its training position: unless the job lets
 * peers mix precisions it carries this rank's, so that ranks at different precisions fail its negotiation on
 * every rank at once, before any step (`precisionsDiffer` words it). It costs nothing: it runs anyway.
 */
export function startCollectiveName(name: string, p: RingPrecision): string {
  return p.mixPrecisions ? name : `${name}${AT}${p.precision ?? 'f32'}`;
}

/** The start collective's mismatch (`startCollectiveName`) where it is the ranks' precisions that differ, in words; else undefined. */
export function precisionsDiffer(err: unknown): RingtrainError | undefined {
  if (!isRingtrainError(err, ErrorCode.Mismatch)) return undefined;
  const requests = (err.detail?.requests ?? []) as { rank: number; name?: string }[];
  const byRank = requests.map((r) => ({ rank: r.rank, precision: r.name?.split(AT)[1] }));
  const precisions = new Set(byRank.map((r) => r.precision));
  if (precisions.has(undefined) || precisions.size < 2) return undefined;
  const said = byRank.map((r) => `rank ${r.rank} ${r.precision}`).join(', ');
  return new RingtrainError(
    ErrorCode.Mismatch,
    `the ranks train at different precisions (${said}) and the job lets no peer mix them: give every peer the job's precision (a worker takes it from the job: drop its --precision), or start the job letting peers mix precisions (run --mix-precisions, job setting mixPrecisions: true)`,
    { precisions: byRank },
  );
}
