import type { Communicator } from '../comm/interface.ts';
import { fromCounts } from './partition.ts';
import { ringAllgather } from './ring.ts';
import { runCollective, validate } from './run.ts';
import { dtypeOf, emptyLike, type CollectiveOptions, type Tensor } from './types.ts';
import { codecFor } from './wire.ts';

/**
 * Allgather: every rank's `data`, concatenated in rank order. Ranks may bring
 * different lengths; negotiation tells everyone how long each block is.
 */
export async function allgather<T extends Tensor>(comm: Communicator, data: T, opts: CollectiveOptions = {}): Promise<T> {
  validate(comm, data, opts, 'allgather');
  const request = { name: opts.name ?? 'allgather', dtype: dtypeOf(data), shape: opts.shape ?? [data.length], extra: [data.length] };
  return runCollective(comm, opts, { kind: 'allgather', request, count: data.length, bytes: data.byteLength, varyingShape: true }, async (run, requests) => {
    const blocks = fromCounts(requests.map((r) => r.extra![0]));
    const total = blocks.reduce((a, b) => a + b.count, 0);
    const buf = emptyLike(data, total) as T;
    buf.set(data, blocks[comm.rank].offset);
    await run.phase('allgather', () => ringAllgather(run, buf, blocks, codecFor('none')));
    return buf;
  });
}
