import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { fromCounts } from './codecs/partition.ts';
import { ringAllgather, type VetBlock } from './transfer/ring.ts';
import type { Request } from './controller/negotiate.ts';
import { runCollective, validate } from './controller/collective.ts';
import { dtypeOf, emptyLike, type CollectiveOptions, type Tensor } from './codecs/types.ts';
import { codecFor } from './codecs/wire.ts';

/**
 * Allgather: every rank's `data`, concatenated in rank order along the first
 * dimension. Ranks may bring different first dimensions (negotiation tells
 * everyone how long each block is); every other dimension must agree, as in
 * Horovod, or every rank fails with a Mismatch naming who sent what.
 */
export async function allgather<T extends Tensor>(
  comm: Communicator,
  data: T,
  opts: CollectiveOptions & { vet?: VetBlock } = {},
): Promise<T> {
  validate(comm, data, opts, 'allgather');
  const shape = opts.shape ?? [data.length];
  if (shape.length === 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'allgather: a scalar (shape []) has no first dimension to gather along; give it shape [1]',
    );
  const request = { name: opts.name ?? 'allgather', dtype: dtypeOf(data)!, shape, extra: [data.length] };
  return runCollective(
    comm,
    opts,
    {
      kind: 'allgather',
      request,
      count: data.length,
      bytes: data.byteLength,
      varyingShape: true,
      named: opts.name !== undefined,
      fast: everyBlockFilled,
    },
    async (run, requests) => {
      const blocks = fromCounts(requests.map((r) => r.extra![0]));
      const total = blocks.reduce((a, b) => a + b.count, 0);
      const buf = emptyLike(data, total);
      buf.set(data, blocks[comm.rank].offset);
      await run.phase('allgather', () => ringAllgather(run, buf, blocks, codecFor('none', buf), { vet: opts.vet }));
      return buf;
    },
  );
}

/** On a cached agreement, every block must hold something: each rank then waits on every other to forward (run.ts). */
function everyBlockFilled(requests: Request[]): boolean {
  return requests.every((r) => (r.extra?.[0] ?? 0) > 0);
}
