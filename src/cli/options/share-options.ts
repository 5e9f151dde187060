/**
 * `run --global-batch G` and `--balance equal|speed`: how a job's peers share
 * its examples per step.
 *
 * `--batch` keeps Horovod's meaning, examples per peer per step, so `-np 4
 * --batch 32` trains at 128 per step as `horovodrun -np 4` with a per-worker
 * batch of 32 does. An elastic run fixes that figure at launch: its global
 * batch is -np × --batch for the whole run, and when peers leave or join the
 * others take larger or smaller shares of it. A Horovod user has to rescale
 * the learning rate by hand when an elastic job's size (and so its batch)
 * changes; a fixed global batch takes the same steps whoever is left, so a
 * run that loses a peer ends where an unbroken one does. `--global-batch`
 * names the figure directly; `--balance speed` shares it by measured speed
 * (src/distributed/train/shares.ts) and implies a fixed global batch.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { BALANCE_MODES, type BalanceMode } from '../../distributed/train/shares.ts';
import type { Hyperparameters } from '../../job/settings.ts';

export interface ShareOptions {
  /** Examples per step for the whole ring (absent: --batch per peer, moving with the ring's size). */
  globalBatch?: number;
  balance: BalanceMode;
}

/** Checks the flags against -np and --batch; `batchGiven`: the user typed --batch (not a default or a recipe). */
export function parseShareOptions(
  raw: Record<string, unknown>,
  o: { np: number; batch: number; elastic: boolean; maxNp?: number },
  batchGiven: boolean,
): ShareOptions {
  const balance = (raw.balance ?? 'equal') as BalanceMode;
  if (!BALANCE_MODES.includes(balance))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--balance must be one of ${BALANCE_MODES.join(', ')}, got ${JSON.stringify(raw.balance)}.`,
    );
  if (raw.globalBatch === undefined) {
    // Elastic or balanced: the launch's -np x --batch, fixed for the run.
    return o.elastic || balance === 'speed' ? { globalBatch: o.np * o.batch, balance } : { balance };
  }
  if (batchGiven)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'give --batch (examples per peer) or --global-batch (examples per step for the whole ring), not both.',
    );
  const g = Number(raw.globalBatch);
  // Every peer the job may hold takes at least one example.
  const most = o.elastic ? Math.max(o.np, o.maxNp ?? o.np) : o.np;
  if (!Number.isInteger(g) || g < most || g > 8192 * 64) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--global-batch must be a whole number from ${most} (one example for each of up to ${most} peers) to ${8192 * 64}, got ${JSON.stringify(raw.globalBatch)}.`,
    );
  }
  return { globalBatch: g, balance };
}

/** What the job's config carries (job-config.ts reads it back). */
export function shareHyperparameters(s: ShareOptions): Hyperparameters {
  return {
    ...(s.globalBatch !== undefined ? { globalBatch: s.globalBatch } : {}),
    ...(s.balance !== 'equal' ? { balance: s.balance } : {}),
  };
}
