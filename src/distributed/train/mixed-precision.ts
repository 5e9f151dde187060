/**
 * --precision f16-mixed for a trainer's model, alone or in a ring. In a ring every rank trains at the
 * job's precision (job-config.ts), each bucket of gradients leaves its rank unscaled (GraphModel's
 * bucket path; the whole-gradient path unscales after backward), and the ranks agree on each step's
 * overflow before any update: a step that overflowed on any rank is skipped by every rank, and every
 * rank's loss scale moves alike, so the replicas stay one.
 */
import type { Communicator } from '../../comm/interface.ts';
import { allreduce } from '../../collectives/allreduce.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Model } from '../../engine/model.ts';

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

  constructor(private readonly model: Model) {}

  /** After a pass's forward-backward (`lastPass`: the one that ends its step): the scale it ran with, and whether the step is skipped. */
  async agree(
    comm: Communicator,
    lastPass: boolean,
    timeoutMs?: number,
  ): Promise<{ lossScale: number; skipped: boolean } | undefined> {
    const scaler = this.model.lossScaler;
    if (!scaler) return undefined;
    const lossScale = scaler.scale;
    // One GPU wait, spared once a pass of the step has overflowed (its gradient read-back waits anyway).
    const overflowed = this.earlierPass || (await scaler.readOverflow());
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
    return { lossScale, skipped: !scaler.settle(ranks > 0) };
  }

  /** Forgets the passes taken so far (the ring re-formed: the step's passes are taken again). */
  reset(): void {
    this.earlierPass = false;
  }
}
