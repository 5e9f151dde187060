import type { Communicator } from '../comm/interface.ts';
import { finish, reduceSettings } from './allreduce.ts';
import { splitEven } from './partition.ts';
import { scaleInPlace } from './reduce.ts';
import { ringReduceScatter } from './ring.ts';
import { runCollective, validate } from './run.ts';
import { dtypeOf, type ReduceOptions, type Tensor } from './types.ts';
import { codecFor } from './wire.ts';

/**
 * Reduce-scatter: op over all ranks' `data`, of which this rank gets its
 * share: elements are split evenly in rank order, the first
 * `length % size` ranks getting one more (`reducescatterRange` tells which).
 */
export async function reducescatter<T extends Tensor>(comm: Communicator, data: T, opts: ReduceOptions = {}): Promise<T> {
  validate(comm, data, opts, 'reducescatter');
  const s = reduceSettings(data, opts, 'reducescatter');
  const request = { name: opts.name ?? 'reducescatter', dtype: dtypeOf(data), shape: opts.shape ?? [data.length], op: s.op, compression: s.compression };
  return runCollective(comm, opts, { kind: 'reducescatter', request, count: data.length, bytes: data.byteLength }, async (run) => {
    const buf = data.slice() as T;
    if (buf instanceof Float32Array) scaleInPlace(buf, s.prescale);
    const chunks = splitEven(buf.length, comm.size);
    await run.phase('reduce-scatter', () => ringReduceScatter(run, buf, chunks, s.op, codecFor(s.compression)));
    const mine = chunks[comm.rank];
    const out = buf.slice(mine.offset, mine.offset + mine.count) as T;
    finish(out, s, comm.size);
    return out;
  });
}

/** Which elements of the full tensor `rank` receives from reducescatter. */
export function reducescatterRange(length: number, size: number, rank: number): { offset: number; count: number } {
  return splitEven(length, size)[rank];
}
