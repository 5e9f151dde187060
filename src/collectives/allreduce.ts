import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import {
  algorithmChoices,
  algorithmNamed,
  allreduceAlgorithms,
  firstEnabled,
  phaseOf,
  rankGroups,
  RING,
  type AllreduceAlgorithm,
} from './algorithms/index.ts';
import { runCollective, validate } from './controller/collective.ts';
import type { Run } from './controller/run.ts';
import {
  COMPRESSIONS,
  DEFAULT_MEDIUM_BYTES,
  DEFAULT_SMALL_BYTES,
  dtypeOf,
  REDUCE_OPS,
  view,
  type Algorithm,
  type Compression,
  type ReduceOptions,
  type ReduceSettings,
  type Tensor,
} from './codecs/types.ts';
import { topkRatio } from './transfer/topk.ts';

export type { ReduceSettings };
export { finish } from './codecs/reduce.ts';
export { MAX_TWO_SHOT_RANKS, ringAllreduceInPlace } from './algorithms/index.ts';

const invalid = (message: string) => new RingtrainError(ErrorCode.InvalidArgument, message);

/** Lossy compressions with a residual of their own (int8, top-k) and error feedback need the ring's path. */
function needsRingPath(compression: Compression, errorFeedback: unknown): boolean {
  return (compression !== 'none' && compression !== 'fp16') || errorFeedback !== undefined;
}

function checkCompression(data: Tensor, compression: Compression, what: string): void {
  if (!COMPRESSIONS.includes(compression) && topkRatio(String(compression)) === null)
    throw invalid(`${what}: unknown compression '${compression}'; use one of ${COMPRESSIONS.join(', ')}, topk:R`);
  if (compression !== 'none' && !(data instanceof Float32Array))
    throw invalid(`${what}: ${compression} compression applies to float32 tensors only; this one is ${dtypeOf(data)}`);
}

/** A named algorithm must exist and, where the reduction needs the ring's path, be on it. */
function checkAlgorithm(algorithm: Algorithm, compression: Compression, errorFeedback: unknown, what: string): void {
  if (!algorithmChoices().includes(algorithm))
    throw invalid(`${what}: unknown algorithm '${algorithm}'; use one of ${algorithmChoices().join(', ')}`);
  // int8's scale is per segment of a partial sum; only the ring sends each position once per rank (error feedback relies
  // on it).
  if (algorithm !== 'auto' && needsRingPath(compression, errorFeedback) && !algorithmNamed(algorithm)!.ringPath) {
    const onPath = allreduceAlgorithms().filter((a) => a.ringPath);
    throw invalid(
      `${what}: ${compression} compression and error feedback run on the ring only; use algorithm ${onPath.map((a) => `'${a.name}'`).join(', ')} or 'auto'`,
    );
  }
}

function checkErrorFeedback(data: Tensor, errorFeedback: unknown, compression: Compression, what: string): void {
  if (errorFeedback === undefined) return;
  if (!(errorFeedback instanceof Float32Array) || errorFeedback.length !== data.length)
    throw invalid(
      `${what}: errorFeedback must be a Float32Array as long as the tensor (${data.length}), got ${errorFeedback instanceof Float32Array ? `length ${errorFeedback.length}` : typeof errorFeedback}`,
    );
  if (compression === 'none')
    throw invalid(`${what}: errorFeedback only applies with a lossy compression ('fp16', 'int8' or 'topk:R')`);
}

/** `value` if it is a number >= 0 (smallBytes, mediumBytes), else an error naming `key`. */
function byteCount(value: number, key: string, what: string): number {
  if (!(value >= 0)) throw invalid(`${what}: ${key} must be a number >= 0, got ${value}`);
  return value;
}

/** Checks and completes reduce options; `what` names the caller in errors. */
export function reduceSettings(data: Tensor, o: ReduceOptions, what: string): ReduceSettings {
  const op = o.op ?? 'sum';
  if (!REDUCE_OPS.includes(op)) throw invalid(`${what}: unknown op '${op}'; use one of ${REDUCE_OPS.join(', ')}`);
  const compression = o.compression ?? 'none';
  checkCompression(data, compression, what);
  const algorithm = o.algorithm ?? 'auto';
  checkAlgorithm(algorithm, compression, o.errorFeedback, what);
  checkErrorFeedback(data, o.errorFeedback, compression, what);
  const smallBytes = byteCount(o.smallBytes ?? DEFAULT_SMALL_BYTES, 'smallBytes', what);
  const mediumBytes = byteCount(o.mediumBytes ?? DEFAULT_MEDIUM_BYTES, 'mediumBytes', what);
  const prescale = o.prescale ?? 1;
  const postscale = o.postscale ?? 1;
  for (const [k, v] of [
    ['prescale', prescale],
    ['postscale', postscale],
  ] as const) {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${what}: ${k} must be a finite number, got ${v}`);
  }
  const { errorFeedback, observeReceived: observe, observeSent, groups } = o;
  const settings = { op, prescale, postscale, compression, algorithm, smallBytes, mediumBytes, groups, errorFeedback };
  return { ...settings, observe, ...(observeSent ? { observeSent } : {}) };
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
    groups: s.groups,
  };
}

/** Which algorithm moves `bytes` on `size` ranks: the same answer on every rank (negotiation checks it). */
export function chooseAlgorithm(s: ReduceSettings, bytes: number, size: number): string {
  // Checked here, before the collective takes an id: a rank whose groups are wrong fails at the call.
  const groups = s.groups === undefined ? undefined : rankGroups(s.groups, size);
  if (s.algorithm !== 'auto') return s.algorithm;
  // Received segments are checked against the ranks that summed them along the ring's path
  // (verified.ts); the hops of recursive doubling, halving-doubling and two-shot follow no such path, so an
  // observed reduction goes round the ring whatever its size, or a lying rank could not be told
  // from its neighbours.
  const ringPath = s.observe !== undefined || needsRingPath(s.compression, s.errorFeedback);
  return firstEnabled({ bytes, size, smallBytes: s.smallBytes, mediumBytes: s.mediumBytes, groups }, ringPath).name;
}

/**
 * 'auto' for a lossless (or fp16) allreduce: the first algorithm of the registry's list
 * (src/collectives/algorithms/) that takes it. Today that is latency-bound small messages by
 * recursive doubling (log2 N rounds); middle sizes by recursive halving-doubling on 4, 8, 16...
 * ranks and by two-shot on 3, 5, 6 and 7; the rest round the ring (2(N-1) steps, every link busy
 * at once). Both middle algorithms send the ring's 2(N-1)/N of the tensor per rank: fewer bytes
 * than recursive doubling's log2(N) tensors once N >= 4, fewer rounds than the ring. Measured on 4
 * WebRTC peers (bench allreduce --sweep), two-shot and halving-doubling were within 8% of each
 * other at 64 KiB to 4 MiB, each ahead at some sizes: powers of two keep halving-doubling, which
 * sends fewer messages. On 2 ranks all of them are the ring's one exchange of halves.
 */
export function autoAlgorithm(
  bytes: number,
  size: number,
  smallBytes: number,
  mediumBytes = DEFAULT_MEDIUM_BYTES,
): string {
  return firstEnabled({ bytes, size, smallBytes, mediumBytes }, false).name;
}

function namedAlgorithm(name: string): AllreduceAlgorithm {
  const found = algorithmNamed(name);
  if (!found) throw invalid(`allreduce: unknown algorithm '${name}'; use one of ${algorithmChoices().join(', ')}`);
  return found;
}

/** The algorithm negotiated; one rank alone takes the ring's path whatever was asked (it rounds a lossy codec as the ring's result is). */
function algorithmFor(name: string, size: number): AllreduceAlgorithm {
  return size === 1 ? RING : namedAlgorithm(name);
}

/** The data part of any allreduce, in place on `buf`, by the algorithm negotiated. */
export function allreduceData(run: Run, buf: Tensor, s: ReduceSettings, algorithm: string): Promise<void> {
  const chosen = algorithmFor(algorithm, run.comm.size);
  return chosen.run(run, buf, s, phaseOf(chosen));
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
  const { observe, observeSent } = s;
  const part = (i: number) => ({
    ...s,
    errorFeedback: s.errorFeedback && view(s.errorFeedback, i * per, Math.min(per, buf.length - i * per)),
    observe: observe && ((offset: number, values: Float32Array) => observe(i * per + offset, values)),
    observeSent: observeSent && ((offset: number, values: Float32Array) => observeSent(i * per + offset, values)),
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
 * rank's result must need every rank's data (each algorithm's `mayGoAhead`; by default any element does it).
 */
export function allreduceMayGoAhead(algorithm: string, count: number, size: number): boolean {
  const a = namedAlgorithm(algorithm);
  return a.mayGoAhead ? a.mayGoAhead(count, size) : count > 0;
}

/**
 * Whether a fast path that falls back could find `buf` (or the residual) changed: the algorithm
 * writes into them before every rank has gone ahead (its `writesEarly`; by default it does).
 */
function needsSnapshot(algorithm: string, s: ReduceSettings): boolean {
  const a = namedAlgorithm(algorithm);
  return a.writesEarly ? a.writesEarly(s) : true;
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
  // An observed (verified) reduction goes ahead on its cached agreement too: a link that corrupts
  // what it carries may damage the fast path's fingerprint, which then fails its own check and goes
  // on (run.ts), so the corrupted data reaches the checks, which name the link.
  const fast = () => allreduceMayGoAhead(algorithm, buf.length, comm.size);
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
      checkedAfter: s.observe !== undefined,
      snapshot: pristine || needsSnapshot(algorithm, s) ? snapshotOf(buf, s, pristine) : undefined,
    },
    (run) => allreduceData(run, buf, s, algorithm),
  );
}
