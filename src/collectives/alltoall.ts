import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { fromCounts, segmentsOf } from './codecs/partition.ts';
import { PHASE_ALLTOALL } from './transfer/ring.ts';
import type { Request } from './controller/negotiate.ts';
import { runCollective, validate } from './controller/collective.ts';
import { dtypeOf, emptyLike, rowElements, view, type CollectiveOptions, type Tensor } from './codecs/types.ts';
import { codecFor } from './codecs/wire.ts';

/**
 * Alltoall, as Horovod's: block j of this rank's `data` goes to rank j; the
 * result holds what every rank sent here, in rank order. Blocks are rows of
 * the first dimension: `splits[j]` rows go to rank j. Without splits the first
 * dimension must divide evenly by the number of ranks, else the call is
 * refused. Every dimension but the first must agree across ranks (negotiation
 * checks), and negotiation shares everyone's splits so each rank knows how
 * much to expect from whom. `recvSplits` counts rows too.
 */
export async function alltoall<T extends Tensor>(
  comm: Communicator,
  data: T,
  opts: CollectiveOptions & { splits?: number[] } = {},
): Promise<{ data: T; recvSplits: number[] }> {
  validate(comm, data, opts, 'alltoall');
  const shape = opts.shape ?? [data.length];
  const splits = splitsOf(comm, shape, opts.splits);
  const per = rowElements(shape);
  const request = { name: opts.name ?? 'alltoall', dtype: dtypeOf(data)!, shape, extra: splits };
  return runCollective(
    comm,
    opts,
    {
      kind: 'alltoall',
      request,
      count: data.length,
      bytes: data.byteLength,
      varyingShape: true,
      named: opts.name !== undefined,
      fast: (requests) => per > 0 && everyPairSends(requests),
    },
    async (run, requests) => {
      const { rank, size } = comm;
      const codec = codecFor('none', data);
      const segment = run.segmentElements(codec);
      const recvSplits = requests.map((r) => r.extra![rank]);
      const mineIn = fromCounts(splits.map((n) => n * per));
      const mineOut = fromCounts(recvSplits.map((n) => n * per));
      const out = emptyLike(
        data,
        mineOut.reduce((a, b) => a + b.count, 0),
      );
      out.set(view(data, mineIn[rank].offset, mineIn[rank].count), mineOut[rank].offset);
      await run.phase('alltoall', async () => {
        // Staggered order, so not everyone sends to the same rank first.
        for (let k = 1; k < size; k++) {
          const to = (rank + k) % size;
          segmentsOf(mineIn[to], segment).forEach((seg, j) => {
            const part = view(data, seg.offset, seg.count);
            const bytes = codec.encode(part);
            run.send(to, run.tag(PHASE_ALLTOALL, 0, j), bytes);
            run.chunkEvent('chunk-send', 'alltoall', k, rank, to, to, seg, bytes.byteLength, part);
          });
        }
        for (let k = 1; k < size; k++) {
          const from = (rank - k + size) % size;
          const segs = segmentsOf(mineOut[from], segment);
          for (let j = 0; j < segs.length; j++) {
            const payload = await run.recv(from, run.tag(PHASE_ALLTOALL, 0, j));
            const incoming = codec.decode(payload, data);
            if (incoming.length !== segs[j].count) {
              throw new RingtrainError(
                ErrorCode.Transport,
                `alltoall: rank ${from} sent ${incoming.length} elements where ${segs[j].count} were expected`,
                { from },
              );
            }
            out.set(incoming, segs[j].offset);
            run.chunkEvent(
              'chunk-recv',
              'alltoall',
              k,
              from,
              rank,
              rank,
              segs[j],
              payload.byteLength,
              incoming,
              incoming,
            );
          }
        }
      });
      return { data: out, recvSplits };
    },
  );
}

/** Rows per destination rank: the given splits, checked, or the first dimension cut evenly (refused if it does not divide). */
function splitsOf(comm: Communicator, shape: readonly number[], given: number[] | undefined): number[] {
  if (shape.length === 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'alltoall: a scalar (shape []) has no first dimension to split; give it shape [1]',
    );
  const rows = shape[0];
  if (!given && rows % comm.size !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `alltoall: the first dimension (${rows}) does not split evenly over ${comm.size} ranks; pass splits (rows per destination rank) to say how to cut it`,
      { rows, size: comm.size },
    );
  }
  const splits = given ?? new Array<number>(comm.size).fill(rows / comm.size);
  if (
    !Array.isArray(splits) ||
    splits.length !== comm.size ||
    !splits.every((n) => Number.isInteger(n) && n >= 0) ||
    splits.reduce((a, b) => a + b, 0) !== rows
  ) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `alltoall: splits [${String(splits)}] must be ${comm.size} non-negative integers adding up to the first dimension (${rows} rows)`,
    );
  }
  return splits;
}

/** On a cached agreement, every rank must send every other something: each then waits on all the others (run.ts). */
function everyPairSends(requests: Request[]): boolean {
  return requests.every((r, from) => (r.extra ?? []).every((rows, to) => to === from || rows > 0));
}
