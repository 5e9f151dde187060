import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { splitEven } from './partition.ts';
import { halvingDoublingAllreduce } from './halving-doubling.ts';
import { recursiveDoublingAllreduce } from './recursive-doubling.ts';
import { divideIntInPlace, scaleInPlace } from './reduce.ts';
import { ringAllgather, ringReduceScatter } from './ring.ts';
import { runCollective, validate, type Run } from './run.ts';
import {
  ALGORITHMS,
  COMPRESSIONS,
  DEFAULT_MEDIUM_BYTES,
  DEFAULT_SMALL_BYTES,
  dtypeOf,
  REDUCE_OPS,
  view,
  type Algorithm,
  type Compression,
  type ReduceOp,
  type ReduceOptions,
  type Tensor,
} from './types.ts';
import { topkAllreduceInPlace, topkRatio } from './topk.ts';
import { twoShotAllreduce } from './two-shot.ts';
import { codecFor, encodeSegment, roundTripInPlace } from './wire.ts';

export interface ReduceSettings {
  op: ReduceOp;
  prescale: number;
  postscale: number;
  compression: Compression;
  algorithm: Algorithm;
  smallBytes: number;
  mediumBytes: number;
  /** The caller's error-feedback residual (lossy compression), as long as the tensor. */
  errorFeedback?: Float32Array;
  /** ReduceOptions.observeReceived (offsets within this tensor). */
  observe?: (offset: number, values: Float32Array) => void;
}

/** Checks and completes reduce options; `what` names the caller in errors. */
export function reduceSettings(data: Tensor, o: ReduceOptions, what: string): ReduceSettings {
  const op = o.op ?? 'sum';
  if (!REDUCE_OPS.includes(op)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: unknown op '${op}'; use one of ${REDUCE_OPS.join(', ')}`,
    );
  }
  const compression = o.compression ?? 'none';
  if (!COMPRESSIONS.includes(compression) && topkRatio(String(compression)) === null) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: unknown compression '${compression}'; use one of ${COMPRESSIONS.join(', ')}, topk:R`,
    );
  }
  if (compression !== 'none' && !(data instanceof Float32Array)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: ${compression} compression applies to float32 tensors only; this one is ${dtypeOf(data)}`,
    );
  }
  const algorithm = o.algorithm ?? 'auto';
  if (!ALGORITHMS.includes(algorithm)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: unknown algorithm '${algorithm}'; use one of ${ALGORITHMS.join(', ')}`,
    );
  }
  // int8's scale is per segment of a partial sum; only the ring sends each position once per rank (error feedback relies
  // on it).
  if ((compression !== 'none' && compression !== 'fp16') || o.errorFeedback) {
    if (algorithm !== 'ring' && algorithm !== 'auto')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: ${compression} compression and error feedback run on the ring only; use algorithm 'ring' or 'auto'`,
      );
  }
  const errorFeedback = o.errorFeedback;
  if (errorFeedback !== undefined) {
    if (!(errorFeedback instanceof Float32Array) || errorFeedback.length !== data.length) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: errorFeedback must be a Float32Array as long as the tensor (${data.length}), got ${errorFeedback instanceof Float32Array ? `length ${errorFeedback.length}` : typeof errorFeedback}`,
      );
    }
    if (compression === 'none')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: errorFeedback only applies with a lossy compression ('fp16', 'int8' or 'topk:R')`,
      );
  }
  const smallBytes = o.smallBytes ?? DEFAULT_SMALL_BYTES;
  if (!(smallBytes >= 0))
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: smallBytes must be a number >= 0, got ${smallBytes}`);
  const mediumBytes = o.mediumBytes ?? DEFAULT_MEDIUM_BYTES;
  if (!(mediumBytes >= 0))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: mediumBytes must be a number >= 0, got ${mediumBytes}`,
    );
  const prescale = o.prescale ?? 1;
  const postscale = o.postscale ?? 1;
  for (const [k, v] of [
    ['prescale', prescale],
    ['postscale', postscale],
  ] as const) {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${k} must be a finite number, got ${v}`);
  }
  return {
    op,
    prescale,
    postscale,
    compression,
    algorithm,
    smallBytes,
    mediumBytes,
    errorFeedback,
    observe: o.observeReceived,
  };
}

/** The fields of a reduction that every rank must agree on (negotiation compares them). */
export function reduceRequest(
  name: string,
  data: Tensor,
  shape: number[] | undefined,
  s: ReduceSettings,
  algorithm?: string,
) {
  return {
    name,
    dtype: dtypeOf(data)!,
    shape: shape ?? [data.length],
    op: s.op,
    compression: s.compression,
    prescale: s.prescale,
    postscale: s.postscale,
    algorithm,
  };
}

/**
 * Turns a fully reduced chunk into the result. Floats: times postscale (over
 * the size for an average). Integers, as Horovod: postscale in float64,
 * truncated, then an average divides by the size, rounding toward zero.
 */
export function finish(mine: Tensor, s: ReduceSettings, size: number): void {
  if (mine instanceof Int32Array || mine instanceof Int8Array) {
    scaleInPlace(mine, s.postscale);
    if (s.op === 'average') divideIntInPlace(mine, size);
    return;
  }
  scaleInPlace(mine, s.op === 'average' ? s.postscale / size : s.postscale);
}

/** Which algorithm moves `bytes` on `size` ranks: the same answer on every rank (negotiation checks it). */
export function chooseAlgorithm(s: ReduceSettings, bytes: number, size: number): Exclude<Algorithm, 'auto'> {
  if (s.algorithm !== 'auto') return s.algorithm;
  // Received segments are checked against the ranks that summed them along the ring's path
  // (verified.ts); the hops of recursive doubling, halving-doubling and two-shot follow no such path, so an
  // observed reduction goes round the ring whatever its size, or a lying rank could not be told
  // from its neighbours.
  if (s.observe) return 'ring';
  if ((s.compression !== 'none' && s.compression !== 'fp16') || s.errorFeedback) return 'ring';
  return autoAlgorithm(bytes, size, s.smallBytes, s.mediumBytes);
}

/**
 * 'auto' for a lossless (or fp16) allreduce: latency-bound small messages by recursive doubling
 * (log2 N rounds); middle sizes by recursive halving-doubling on 4, 8, 16... ranks and by two-shot
 * on 3, 5, 6 and 7; the rest round the ring (2(N-1) steps, every link busy at once). Both middle
 * algorithms send the ring's 2(N-1)/N of the tensor per rank: fewer bytes than recursive
 * doubling's log2(N) tensors once N >= 4, fewer rounds than the ring. Halving-doubling's fold on
 * a size that is not a power of two moves the whole tensor in and out, which takes its saving
 * away; two-shot needs no fold and takes 2 rounds at any size, for 2(N-1) messages per rank, so
 * it stops at MAX_TWO_SHOT_RANKS. Measured on 4 WebRTC peers (bench allreduce --sweep),
 * two-shot and halving-doubling were within 8% of each other at 64 KiB to 4 MiB, each ahead at
 * some sizes: powers of two keep halving-doubling, which sends fewer messages. On 3 peers
 * two-shot beat the ring by 8-13% at 256 KiB to 4 MiB. On 2 ranks all of them are the ring's
 * one exchange of halves.
 */
export function autoAlgorithm(
  bytes: number,
  size: number,
  smallBytes: number,
  mediumBytes = DEFAULT_MEDIUM_BYTES,
): Exclude<Algorithm, 'auto'> {
  if (size <= 1) return 'ring';
  if (bytes <= smallBytes) return 'recursive-doubling';
  if (bytes > mediumBytes || size <= 2) return 'ring';
  if ((size & (size - 1)) === 0) return 'halving-doubling';
  return size <= MAX_TWO_SHOT_RANKS ? 'two-shot' : 'ring';
}

/** The most ranks 'auto' sends two-shot: beyond, each rank's 2(N-1) messages a step outweigh the rounds it saves. */
export const MAX_TWO_SHOT_RANKS = 8;

/**
 * The data part of a ring allreduce, in place on `buf` (shared with tensor fusion).
 * With error feedback the residual holds sum-domain values (after prescale) at
 * the positions this rank sends in reduce-scatter and result-domain values in
 * its own chunk: each position always in the same one while the size holds.
 */
export async function ringAllreduceInPlace(
  run: Run,
  buf: Tensor,
  s: ReduceSettings,
  residual = s.errorFeedback,
): Promise<void> {
  const { rank, size } = run.comm;
  scaleInPlace(buf, s.prescale);
  // Sparse pairs are gathered, not reduced along the ring (topk.ts); every rank then holds the sum.
  const ratio = topkRatio(s.compression);
  if (ratio !== null) {
    await topkAllreduceInPlace(run, buf as Float32Array, ratio, residual);
    return finish(buf, s, size);
  }
  const codec = codecFor(s.compression, buf);
  const chunks = splitEven(buf.length, size);
  // Going ahead on the cache, partial sums stay apart from `buf` until every rank is known to have gone ahead too.
  const partial = run.goingAhead && size > 2 ? takePartial(run.comm, buf) : buf;
  try {
    await run.phase('reduce-scatter', () =>
      ringReduceScatter(run, buf, chunks, s.op, codec, residual, s.observe, partial),
    );
  } finally {
    if (partial !== buf) givePartial(run.comm, partial);
  }
  finish(view(buf, chunks[rank].offset, chunks[rank].count), s, size);
  // Allgather makes the owner keep exactly what the others receive (lossy codecs); alone, round it here.
  if (size === 1) {
    if (residual) encodeSegment(codec, buf, residual);
    else roundTripInPlace(codec, buf);
  }
  await run.phase('allgather', () => ringAllgather(run, buf, chunks, codec, residual));
}

/** The data part of any allreduce, in place on `buf`, by the algorithm negotiated. */
export async function allreduceData(
  run: Run,
  buf: Tensor,
  s: ReduceSettings,
  algorithm: Exclude<Algorithm, 'auto'>,
): Promise<void> {
  if (algorithm === 'ring' || run.comm.size === 1) return ringAllreduceInPlace(run, buf, s);
  scaleInPlace(buf, s.prescale);
  const codec = codecFor(s.compression, buf);
  const done = (t: Tensor) => finish(t, s, run.comm.size);
  if (algorithm === 'halving-doubling')
    return run.phase('halving-doubling', () => halvingDoublingAllreduce(run, buf, s.op, codec, done));
  if (algorithm === 'two-shot') return run.phase('two-shot', () => twoShotAllreduce(run, buf, s.op, codec, done));
  await run.phase('recursive-doubling', () => recursiveDoublingAllreduce(run, buf, s.op, codec, done));
}

/**
 * Allreduce: every rank gets op(all ranks' `data`), as a new array (`data`
 * is left alone). Large tensors go round the ring (reduce-scatter, then
 * allgather, both segmented); small ones by recursive doubling, middle sizes
 * by recursive halving-doubling or two-shot (autoAlgorithm).
 */
export async function allreduce<T extends Tensor>(comm: Communicator, data: T, opts: ReduceOptions = {}): Promise<T> {
  validate(comm, data, opts, 'allreduce');
  const s = reduceSettings(data, opts, 'allreduce');
  const buf = data.slice() as T;
  await reduceOne(comm, buf, opts.name, opts, s, data);
  return buf;
}

/**
 * Allreduce in place: `buf` itself becomes op(all ranks' `buf`), without a
 * copy. A buffer bigger than `chunkBytes` (the fusion threshold, 64 MiB by
 * default) is reduced as consecutive chunks, each its own collective
 * (`name[i/n]`), started together so they pipeline. This is the path for the
 * flat gradient buffer: its views are reduced where they lie.
 */
export async function allreduceInPlace<T extends Tensor>(
  comm: Communicator,
  buf: T,
  opts: ReduceOptions & { chunkBytes?: number } = {},
): Promise<T> {
  validate(comm, buf, opts, 'allreduceInPlace');
  const s = reduceSettings(buf, opts, 'allreduceInPlace');
  const chunkBytes = opts.chunkBytes ?? 64 * 1024 * 1024;
  if (!(chunkBytes >= buf.BYTES_PER_ELEMENT))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `allreduceInPlace: chunkBytes must be at least one element (${buf.BYTES_PER_ELEMENT} bytes), got ${chunkBytes}`,
    );
  if (opts.shape && buf.byteLength > chunkBytes)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `allreduceInPlace: a shape describes one tensor, but this one is cut into chunks of ${chunkBytes} bytes; leave shape out or raise chunkBytes`,
    );
  const per = Math.floor(chunkBytes / buf.BYTES_PER_ELEMENT);
  const n = Math.max(1, Math.ceil(buf.length / per));
  const name = opts.name ?? 'allreduce';
  const observe = s.observe;
  const part = (i: number) => ({
    ...s,
    errorFeedback: s.errorFeedback && view(s.errorFeedback, i * per, Math.min(per, buf.length - i * per)),
    observe: observe && ((offset: number, values: Float32Array) => observe(i * per + offset, values)),
  });
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      reduceOne(
        comm,
        view(buf, i * per, Math.min(per, buf.length - i * per)),
        n === 1 ? name : `${name}[${i}/${n}]`,
        opts,
        n === 1 ? s : part(i),
      ),
    ),
  );
  return buf;
}

/**
 * Whether an allreduce of `count` elements may go ahead on its cached agreement (run.ts): every
 * rank's result must need every rank's data. Recursive doubling, halving-doubling and two-shot:
 * any element does it (the last two send a message in every round, empty blocks or not); the ring: every
 * chunk must hold one, or a rank whose chunk is empty could finish without hearing of a rank
 * that fell back.
 */
export function allreduceMayGoAhead(algorithm: Exclude<Algorithm, 'auto'>, count: number, size: number): boolean {
  return algorithm === 'ring' ? count >= size : count > 0;
}

/** Buffers for the ring's partial sums on the fast path, per communicator: reused call after call (a step's gradient keeps its length). */
const partials = new WeakMap<Communicator, Tensor[]>();
/**
 * Kept per communicator: as many as run at once in practice, the pieces of one allreduceInPlace
 * or a step's gradient buckets (at most 16 of them, src/engine/grad-buckets.ts: together no more
 * than one gradient).
 */
const MAX_FREE_PARTIALS = 16;

function takePartial(comm: Communicator, like: Tensor): Tensor {
  const free = partials.get(comm);
  const i = free ? free.findIndex((t) => t.constructor === like.constructor && t.length === like.length) : -1;
  if (i >= 0) return free!.splice(i, 1)[0];
  return new (like.constructor as new (n: number) => Tensor)(like.length);
}

function givePartial(comm: Communicator, t: Tensor): void {
  let free = partials.get(comm);
  if (!free) partials.set(comm, (free = []));
  if (free.length < MAX_FREE_PARTIALS) free.push(t);
}

/**
 * Whether a fast path that falls back could find `buf` (or the residual) changed. The ring
 * without a prescale, error feedback or top-k writes nothing into them until every rank has gone
 * ahead (ring.ts), after which it cannot fall back: no snapshot, no copy per call. Recursive
 * doubling, halving-doubling and two-shot (small and middle sizes) and the rest change them from the first step.
 */
function needsSnapshot(algorithm: Exclude<Algorithm, 'auto'>, s: ReduceSettings): boolean {
  return algorithm !== 'ring' || s.prescale !== 1 || s.errorFeedback !== undefined || topkRatio(s.compression) !== null;
}

/** Saves `buf` (and the residual) so that a fast path that falls back starts again from them; `pristine`: a copy already kept. */
function snapshotOf(buf: Tensor, s: ReduceSettings, pristine?: Tensor): () => () => void {
  return () => {
    const saved = pristine ?? buf.slice();
    const residual = s.errorFeedback?.slice();
    return () => {
      buf.set(saved as never);
      if (residual) s.errorFeedback!.set(residual);
    };
  };
}

function reduceOne(
  comm: Communicator,
  buf: Tensor,
  name: string | undefined,
  opts: ReduceOptions,
  s: ReduceSettings,
  pristine?: Tensor,
): Promise<void> {
  const algorithm = chooseAlgorithm(s, buf.byteLength, comm.size);
  const request = reduceRequest(name ?? 'allreduce', buf, opts.shape, s, algorithm);
  // An observed (verified) reduction negotiates every time: a link that corrupts what it carries
  // corrupts the fast path's fingerprint too, and a rank that had already gone ahead could then
  // only abort the step with nobody named; negotiated, the corrupted data reaches the checks,
  // which name the link.
  const fast = () => !s.observe && allreduceMayGoAhead(algorithm, buf.length, comm.size);
  return runCollective(
    comm,
    opts,
    {
      kind: 'allreduce',
      request,
      count: buf.length,
      bytes: buf.byteLength,
      named: name !== undefined,
      fast,
      snapshot: pristine || needsSnapshot(algorithm, s) ? snapshotOf(buf, s, pristine) : undefined,
    },
    (run) => allreduceData(run, buf, s, algorithm),
  );
}
