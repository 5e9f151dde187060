import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { ringBroadcast } from './transfer/ring.ts';
import { runCollective, validate } from './controller/collective.ts';
import { dtypeOf, type CollectiveOptions, type Tensor } from './codecs/types.ts';
import { codecFor } from './codecs/wire.ts';

/** Broadcast: every rank gets `root`'s `data` (a new array), pipelined along the ring. */
export function broadcast<T extends Tensor>(
  comm: Communicator,
  data: T,
  opts: CollectiveOptions & { root?: number } = {},
): Promise<T> {
  validate(comm, data, opts, 'broadcast');
  return broadcastInPlace(comm, data.slice() as T, opts);
}

/**
 * broadcast into `data` itself: every rank's `data` ends as the root's. For a tensor the size of
 * a model, which a copy on every rank would double while it moves.
 */
export async function broadcastInPlace<T extends Tensor>(
  comm: Communicator,
  data: T,
  opts: CollectiveOptions & { root?: number } = {},
): Promise<T> {
  validate(comm, data, opts, 'broadcast');
  const root = opts.root ?? 0;
  if (!Number.isInteger(root) || root < 0 || root >= comm.size) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `broadcast: root ${root} is not a rank of this ring (0..${comm.size - 1})`,
    );
  }
  const request = { name: opts.name ?? 'broadcast', dtype: dtypeOf(data)!, shape: opts.shape ?? [data.length], root };
  return runCollective(
    comm,
    opts,
    { kind: 'broadcast', request, count: data.length, bytes: data.byteLength, named: opts.name !== undefined },
    async (run) => {
      await run.phase('broadcast', () => ringBroadcast(run, data, root, codecFor('none', data)));
      return data;
    },
  );
}
