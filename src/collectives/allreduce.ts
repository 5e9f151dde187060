import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { splitEven } from './partition.ts';
import { divideIntInPlace, scaleInPlace } from './reduce.ts';
import { ringAllgather, ringReduceScatter } from './ring.ts';
import { runCollective, validate, type Run } from './run.ts';
import { dtypeOf, REDUCE_OPS, type Compression, type ReduceOp, type ReduceOptions, type Tensor } from './types.ts';
import { codecFor, roundTripInPlace } from './wire.ts';

export interface ReduceSettings {
  op: ReduceOp;
  prescale: number;
  postscale: number;
  compression: Compression;
}

/** Checks and completes reduce options; `what` names the caller in errors. */
export function reduceSettings(data: Tensor, o: ReduceOptions, what: string): ReduceSettings {
  const op = o.op ?? 'sum';
  if (!REDUCE_OPS.includes(op)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: unknown op '${op}'; use one of ${REDUCE_OPS.join(', ')}`);
  }
  const compression = o.compression ?? 'none';
  if (compression !== 'none' && compression !== 'fp16') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: unknown compression '${compression}'; use 'none' or 'fp16'`);
  }
  const isInt = data instanceof Int32Array;
  if (isInt && compression === 'fp16') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: fp16 compression applies to float32 tensors only; this one is int32`);
  }
  const prescale = o.prescale ?? 1;
  const postscale = o.postscale ?? 1;
  for (const [k, v] of [['prescale', prescale], ['postscale', postscale]] as const) {
    if (!Number.isFinite(v)) throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${k} must be a finite number, got ${v}`);
    if (isInt && v !== 1) throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${k} applies to float32 tensors only; scale int32 data yourself`);
  }
  return { op, prescale, postscale, compression };
}

/** Turns this rank's reduced chunk into the final result: average, postscale, wire rounding. */
export function finish(mine: Tensor, s: ReduceSettings, size: number): void {
  if (mine instanceof Int32Array) {
    if (s.op === 'average') divideIntInPlace(mine, size);
    return;
  }
  scaleInPlace(mine, s.op === 'average' ? s.postscale / size : s.postscale);
}

/** The data part of a ring allreduce, in place on `buf` (shared with tensor fusion). */
export async function ringAllreduceInPlace(run: Run, buf: Tensor, s: ReduceSettings): Promise<void> {
  const { rank, size } = run.comm;
  const codec = codecFor(s.compression);
  if (buf instanceof Float32Array) scaleInPlace(buf, s.prescale);
  const chunks = splitEven(buf.length, size);
  await run.phase('reduce-scatter', () => ringReduceScatter(run, buf, chunks, s.op, codec));
  finish(buf.subarray(chunks[rank].offset, chunks[rank].offset + chunks[rank].count), s, size);
  // Allgather makes the owner keep exactly what the others receive (lossy codecs); alone, round it here.
  if (size === 1) roundTripInPlace(codec, buf);
  await run.phase('allgather', () => ringAllgather(run, buf, chunks, codec));
}

/**
 * Ring allreduce: every rank gets op(all ranks' `data`), as a new array
 * (`data` is left alone). Reduce-scatter, then allgather, both segmented.
 */
export async function allreduce<T extends Tensor>(comm: Communicator, data: T, opts: ReduceOptions = {}): Promise<T> {
  validate(comm, data, opts, 'allreduce');
  const s = reduceSettings(data, opts, 'allreduce');
  const name = opts.name ?? 'allreduce';
  const request = { name, dtype: dtypeOf(data), shape: opts.shape ?? [data.length], op: s.op, compression: s.compression };
  return runCollective(comm, opts, { kind: 'allreduce', request, count: data.length, bytes: data.byteLength }, async (run) => {
    const buf = data.slice() as T;
    await ringAllreduceInPlace(run, buf, s);
    return buf;
  });
}
