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
 * After a ring rank's forward-backward, before its reduction: whether any rank's step overflowed (one GPU
 * wait, then a one-number sum over the ring), settled on this rank's loss scale. Undefined in f32.
 */
export async function agreeOnOverflow(
  model: Model,
  comm: Communicator,
  timeoutMs?: number,
): Promise<{ lossScale: number; skipped: boolean } | undefined> {
  const scaler = model.lossScaler;
  if (!scaler) return undefined;
  const lossScale = scaler.scale;
  const own = Float32Array.of((await scaler.readOverflow()) ? 1 : 0);
  const [ranks] = await allreduce(comm, own, { op: 'sum', name: 'f16-overflow', timeoutMs });
  return { lossScale, skipped: !scaler.settle(ranks > 0) };
}
