/** The vocabulary shared by every collective. */

export type ReduceOp = 'sum' | 'average' | 'min' | 'max' | 'product';
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product'];

/**
 * Element types. float16 tensors are `Uint16Array`s of IEEE half-float bit
 * patterns (Node 20 has no Float16Array; `float32ToFloat16` makes them), and
 * reductions on them compute in float32 and round back, as Horovod does on CPUs.
 */
export type DType = 'float32' | 'int32' | 'float16' | 'int8';
export const DTYPES: readonly DType[] = ['float32', 'int32', 'float16', 'int8'];
export type Tensor = Float32Array | Int32Array | Uint16Array | Int8Array;

/**
 * 'fp16': float32 tensors travel as float16 (half the bytes). 'int8': as one
 * byte per element plus a float32 scale per segment (a quarter), best with
 * error feedback (`ReduceOptions.errorFeedback`). 'topk:R': each rank sends
 * only its fraction R of largest-magnitude elements, as (index, value) pairs
 * (topk.ts), best with error feedback too.
 */
export type Compression = 'none' | 'fp16' | 'int8' | `topk:${string}`;
/** The kinds without a parameter; 'topk:R' is the one with. */
export const COMPRESSIONS: readonly Compression[] = ['none', 'fp16', 'int8'];

/**
 * How allreduce moves data: 'auto' (the default) or an algorithm's name (src/collectives/algorithms/,
 * one file each). 'ring': reduce-scatter then allgather, 2(N-1)
 * steps, bandwidth-optimal for large tensors. 'recursive-doubling': log2(N)
 * steps of whole-tensor exchanges (two more for a non-power-of-two N), the
 * fewest hops for small tensors. 'halving-doubling': reduce-scatter by
 * recursive halving, allgather by recursive doubling, 2·log2(N) steps (two
 * more for a non-power-of-two N) carrying the ring's bytes, for middle sizes.
 * 'two-shot': a reduce-scatter and an allgather of direct messages over the
 * full mesh, 2 steps carrying the ring's bytes, for middle sizes on few ranks.
 * 'hierarchical': rings inside groups of ranks that share a host and, per shard, between the
 * groups (`groups`), Horovod's hierarchical allreduce.
 * 'auto' picks by size (`smallBytes`, `mediumBytes`): the first algorithm in the registry's order that takes it.
 */
export type Algorithm = 'auto' | (string & {});

/** ReduceOptions.groups: ranks per host, or the ranks of each host. */
export type RankGroups = number | readonly (readonly number[])[];

export interface CollectiveOptions {
  /** The tensor's name; every rank must use the same one (negotiation checks). */
  name?: string;
  /** The logical shape; defaults to [length]. Ranks must agree (except where sizes may differ per rank). */
  shape?: number[];
  /** Fail with Timeout if a rank stays silent this long (ms). */
  timeoutMs?: number;
  /** Largest piece sent at once (bytes); smaller pieces pipeline better, tests force tiny ones. */
  segmentBytes?: number;
}

export interface ReduceOptions extends CollectiveOptions {
  op?: ReduceOp;
  /**
   * Multiply the input by this before reducing. Every rank must give the same
   * factor. Integer tensors are scaled in float64 and truncated toward zero;
   * float16 ones in float32.
   */
  prescale?: number;
  /** Multiply the result by this after reducing (same rules as prescale). */
  postscale?: number;
  compression?: Compression;
  /**
   * Allreduce with a lossy compression only: this rank's residual, a float32
   * array as long as the tensor, kept by the caller from one call to the next
   * (zeros at first). What compression cut off in one call is sent in the next,
   * so nothing is lost over time. Valid while the ring's size and the tensor's
   * layout stay the same; zero it when they change.
   */
  errorFeedback?: Float32Array;
  /** Allreduce only: the data-movement algorithm (default 'auto'). */
  algorithm?: Algorithm;
  /** With algorithm 'auto': tensors of at most this many bytes use recursive doubling. */
  smallBytes?: number;
  /** With algorithm 'auto': tensors above smallBytes and of at most this many bytes use recursive halving-doubling on 4, 8, 16... ranks (other sizes: the ring). */
  mediumBytes?: number;
  /**
   * Which ranks share a host, for the hierarchical algorithm (src/collectives/algorithms/hierarchical.ts):
   * ranks per host (consecutive ranks together), or each host's ranks listed, every rank once. Every rank
   * must pass the same (negotiation compares them). Given (two or more groups, one with several ranks),
   * 'auto' reduces hierarchically what it would otherwise send round the ring.
   */
  groups?: RankGroups;
  /**
   * Ring allreduce only ('auto' goes round the ring at any size when this is given): called with every segment this rank
   * receives in reduce-scatter
   * (a partial sum of the ranks before it on the chunk's path, after prescale), before it
   * is reduced in: `offset` is where the segment lies in the tensor. The verified allreduce
   * checks each hop with it. A fast path that falls back calls it again for the same offsets.
   */
  observeReceived?: (offset: number, values: Float32Array) => void;
  /**
   * With observeReceived: called with every segment this rank sends in reduce-scatter, as it is
   * handed to the communicator (the verified allreduce signs a digest of what each link carried).
   */
  observeSent?: (offset: number, values: Float32Array) => void;
}

/** Reduce options checked and completed (allreduce.ts reduceSettings): what an algorithm runs with. */
export interface ReduceSettings {
  op: ReduceOp;
  prescale: number;
  postscale: number;
  compression: Compression;
  algorithm: Algorithm;
  smallBytes: number;
  mediumBytes: number;
  groups?: RankGroups;
  /** The caller's error-feedback residual (lossy compression), as long as the tensor. */
  errorFeedback?: Float32Array;
  /** ReduceOptions.observeReceived (offsets within this tensor). */
  observe?: (offset: number, values: Float32Array) => void;
  /** ReduceOptions.observeSent (offsets within this tensor). */
  observeSent?: (offset: number, values: Float32Array) => void;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
/** One data-channel message worth of payload: big enough to keep WebRTC busy, small enough to pipeline. */
export const DEFAULT_SEGMENT_BYTES = 256 * 1024 - 16;
/**
 * Up to this size 'auto' allreduce uses recursive doubling. Set from
 * `ringtrain bench allreduce --sweep --peers 4 --transport webrtc` on the
 * project's 2-core machine (median ms, ring / recursive doubling): 16 KiB
 * 16.2 / 14.5, 64 KiB 27.2 / 18.3, 256 KiB 66.2 / 109.1: the ring wins from
 * somewhere between 64 and 256 KiB. Halving-doubling did not move it: at
 * 64 KiB on 4 peers it tied recursive doubling (7 runs, median 1% faster),
 * at 32 KiB it lost by about 10%; on 2 and 3 peers recursive doubling beat
 * both others up to 64 KiB.
 */
export const DEFAULT_SMALL_BYTES = 64 * 1024;
/**
 * Above DEFAULT_SMALL_BYTES and up to this size, 'auto' allreduce on 4, 8,
 * 16... ranks uses recursive halving-doubling. `ringtrain bench allreduce
 * --peers 4 --transport webrtc --bytes SIZE` (latency_hd_ms / latency_ring_ms,
 * each forced, same run; load 1.2-2.3): 128 KiB 10.4 / 13.3, 256 KiB 20.9 /
 * 24.6, 20.1 / 22.2, 19.7 / 23.4, 512 KiB 36.1 / 39.9, 34.7 / 38.3, 39.2 /
 * 40.0, 1 MiB 61.2 / 63.6, 74.4 / 82.1, 63.3 / 69.0, 64.9 / 63.5; 4 MiB
 * 252 / 250 (the sweep).
 */
export const DEFAULT_MEDIUM_BYTES = 1024 * 1024;

const DTYPE_OF = new Map<unknown, DType>([
  [Float32Array, 'float32'],
  [Int32Array, 'int32'],
  [Uint16Array, 'float16'],
  [Int8Array, 'int8'],
]);

/** The dtype of a supported tensor, or null for anything else. */
export function dtypeOf(t: unknown): DType | null {
  return (t !== null && typeof t === 'object' && DTYPE_OF.get(t.constructor)) || null;
}

export function isIntegerDtype(d: DType): boolean {
  return d === 'int32' || d === 'int8';
}

export function emptyLike<T extends Tensor>(t: T, length: number): T {
  return new (t.constructor as new (n: number) => T)(length);
}

/** A view of `t`'s elements [offset, offset + count) (no copy). */
export function view<T extends Tensor>(t: T, offset: number, count: number): T {
  return t.subarray(offset, offset + count) as T;
}

/** Elements per first-dimension row of `shape` (1 for a 1-D shape). */
export function rowElements(shape: number[]): number {
  return shape.slice(1).reduce((a, b) => a * b, 1);
}
