/**
 * A membership epoch as the elastic hooks count it. The signaling server
 * numbers epochs per connection, and a restarted server starts again from 1,
 * so a session counts its server connections (generations): any membership of
 * a later connection is newer than every one of an earlier connection.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

export interface RingEpoch {
  /** The server connection the membership came from (0 for the first). */
  readonly generation: number;
  /** The server's epoch number within that connection. */
  readonly epoch: number;
}

/** Negative when `a` is older than `b`, 0 when they are the same, positive when newer. */
export function compareEpochs(a: RingEpoch, b: RingEpoch): number {
  return a.generation !== b.generation ? a.generation - b.generation : a.epoch - b.epoch;
}

/** The newer of the two. */
export function newerEpoch(a: RingEpoch, b: RingEpoch): RingEpoch {
  return compareEpochs(a, b) >= 0 ? a : b;
}

/** The first epoch after `e` on the same server connection. */
export function epochAfter(e: RingEpoch): RingEpoch {
  return { generation: e.generation, epoch: e.epoch + 1 };
}

/** "epoch 4", or "epoch 4 of server connection 2" after a reconnect (for messages). */
export function formatEpoch(e: RingEpoch): string {
  return e.generation === 0 ? `epoch ${e.epoch}` : `epoch ${e.epoch} of server connection ${e.generation + 1}`;
}

/**
 * Room for the epochs of one server connection in the ranks' one-number agreement (an Int32
 * max-allreduce, elastic-ring.ts): 2,147 connections of up to a million epochs each.
 */
const EPOCHS_PER_GENERATION = 1_000_000;
const MAX_GENERATION = Math.floor(0x7fffffff / EPOCHS_PER_GENERATION) - 1;

/** The one Int32 whose order is the epochs' order: what the ranks' max-allreduce agrees on. */
export function epochToAgreement(e: RingEpoch): number {
  if (e.epoch < 0 || e.epoch >= EPOCHS_PER_GENERATION || e.generation < 0 || e.generation > MAX_GENERATION)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${formatEpoch(e)} is past what the ranks can agree on (up to ${EPOCHS_PER_GENERATION - 1} epochs per server connection, ${MAX_GENERATION + 1} connections): restart the job from its last checkpoint`,
      { generation: e.generation, epoch: e.epoch },
    );
  return e.generation * EPOCHS_PER_GENERATION + e.epoch;
}

/** The epoch an agreement's answer stands for (epochToAgreement's inverse). */
export function epochFromAgreement(n: number): RingEpoch {
  return { generation: Math.floor(n / EPOCHS_PER_GENERATION), epoch: n % EPOCHS_PER_GENERATION };
}
