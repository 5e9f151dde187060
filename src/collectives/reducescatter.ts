import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { finish, reduceRequest, reduceSettings } from './allreduce.ts';
import { splitEven, type Range } from './codecs/partition.ts';
import { scaleInPlace } from './codecs/reduce.ts';
import { ringReduceScatter } from './transfer/ring.ts';
import { runCollective, validate } from './controller/collective.ts';
import { rowElements, type ReduceOptions, type Tensor } from './codecs/types.ts';
import { codecFor } from './codecs/wire.ts';

/**
 * Reduce-scatter: op over all ranks' `data`, of which this rank gets its
 * share. As in Horovod, the tensor is split along its first dimension: rank r
 * gets rows [r*q + min(r, m), ...) where q = rows / size and the first
 * m = rows % size ranks get one row more (`reducescatterRange` tells which
 * elements). A scalar cannot be split and is refused.
 */
export async function reducescatter<T extends Tensor>(
  comm: Communicator,
  data: T,
  opts: ReduceOptions = {},
): Promise<T> {
  validate(comm, data, opts, 'reducescatter');
  if (opts.errorFeedback)
    throw new RingtrainError(ErrorCode.InvalidArgument, 'reducescatter: errorFeedback applies to allreduce only');
  const s = reduceSettings(data, opts, 'reducescatter');
  const shape = opts.shape ?? [data.length];
  if (shape.length === 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'reducescatter: a scalar (shape []) has no first dimension to split over the ranks; give it shape [1] or use allreduce',
    );
  const request = reduceRequest(opts.name ?? 'reducescatter', data, shape, s);
  return runCollective(
    comm,
    opts,
    {
      kind: 'reducescatter',
      request,
      count: data.length,
      bytes: data.byteLength,
      named: opts.name !== undefined,
      fast: () => shape[0] >= comm.size && rowElements(shape) > 0,
    },
    async (run) => {
      const buf = data.slice() as T;
      scaleInPlace(buf, s.prescale);
      const chunks = rowChunks(shape, comm.size);
      await run.phase('reduce-scatter', () => ringReduceScatter(run, buf, chunks, s.op, codecFor(s.compression, buf)));
      const mine = chunks[comm.rank];
      const out = buf.slice(mine.offset, mine.offset + mine.count) as T;
      finish(out, s, comm.size);
      return out;
    },
  );
}

/** Each rank's elements: whole rows of the first dimension, split as evenly as they go. */
function rowChunks(shape: number[], size: number): Range[] {
  const per = rowElements(shape);
  return splitEven(shape[0], size).map((r) => ({ offset: r.offset * per, count: r.count * per }));
}

/** Which elements of the full tensor `rank` receives from reducescatter (shape defaults to [length]). */
export function reducescatterRange(length: number, size: number, rank: number, shape: number[] = [length]): Range {
  return rowChunks(shape, size)[rank];
}
