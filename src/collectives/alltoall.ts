import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { fromCounts, segmentsOf, splitEven } from './partition.ts';
import { PHASE_ALLTOALL } from './ring.ts';
import { runCollective, validate } from './run.ts';
import { dtypeOf, emptyLike, type CollectiveOptions, type Tensor } from './types.ts';
import { codecFor } from './wire.ts';

/**
 * Alltoall: block j of this rank's `data` goes to rank j; the result holds
 * what every rank sent here, in rank order. `splits[j]` is the length of
 * block j (default: even split). Negotiation shares everyone's splits, so
 * each rank knows how much to expect from whom.
 */
export async function alltoall<T extends Tensor>(comm: Communicator, data: T, opts: CollectiveOptions & { splits?: number[] } = {}): Promise<{ data: T; recvSplits: number[] }> {
  validate(comm, data, opts, 'alltoall');
  const splits = opts.splits ?? splitEven(data.length, comm.size).map((r) => r.count);
  if (splits.length !== comm.size || !splits.every((n) => Number.isInteger(n) && n >= 0) || splits.reduce((a, b) => a + b, 0) !== data.length) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `alltoall: splits [${splits.join(', ')}] must be ${comm.size} non-negative integers adding up to the tensor's ${data.length} elements`);
  }
  const request = { name: opts.name ?? 'alltoall', dtype: dtypeOf(data), shape: opts.shape ?? [data.length], extra: splits };
  return runCollective(comm, opts, { kind: 'alltoall', request, count: data.length, bytes: data.byteLength, varyingShape: true }, async (run, requests) => {
    const { rank, size } = comm;
    const codec = codecFor('none');
    const per = run.segmentElements(codec);
    const recvSplits = requests.map((r) => r.extra![rank]);
    const mineIn = fromCounts(splits);
    const mineOut = fromCounts(recvSplits);
    const out = emptyLike(data, mineOut.reduce((a, b) => a + b.count, 0)) as T;
    out.set(data.subarray(mineIn[rank].offset, mineIn[rank].offset + mineIn[rank].count), mineOut[rank].offset);
    await run.phase('alltoall', async () => {
      // Staggered order, so not everyone sends to the same rank first.
      for (let k = 1; k < size; k++) {
        const to = (rank + k) % size;
        segmentsOf(mineIn[to], per).forEach((seg, j) => {
          const view = data.subarray(seg.offset, seg.offset + seg.count);
          const bytes = codec.encode(view);
          run.send(to, run.tag(PHASE_ALLTOALL, 0, j), bytes);
          run.chunkEvent('chunk-send', 'alltoall', k, rank, to, to, seg, bytes.byteLength, view);
        });
      }
      for (let k = 1; k < size; k++) {
        const from = (rank - k + size) % size;
        const segs = segmentsOf(mineOut[from], per);
        for (let j = 0; j < segs.length; j++) {
          const payload = await run.recv(from, run.tag(PHASE_ALLTOALL, 0, j));
          const incoming = codec.decode(payload, data);
          if (incoming.length !== segs[j].count) {
            throw new RingtrainError(ErrorCode.Transport, `alltoall: rank ${from} sent ${incoming.length} elements where ${segs[j].count} were expected`, { from });
          }
          out.set(incoming, segs[j].offset);
          run.chunkEvent('chunk-recv', 'alltoall', k, from, rank, rank, segs[j], payload.byteLength, incoming, incoming);
        }
      }
    });
    return { data: out, recvSplits };
  });
}
