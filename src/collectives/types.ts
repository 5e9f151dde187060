/** The vocabulary shared by every collective. */

export type ReduceOp = 'sum' | 'average' | 'min' | 'max' | 'product';
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'average', 'min', 'max', 'product'];

export type DType = 'float32' | 'int32';
export type Tensor = Float32Array | Int32Array;

/** 'fp16': float32 tensors travel as float16 (half the bytes). */
export type Compression = 'none' | 'fp16';

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
  /** Multiply the input by this before reducing (float32 only). */
  prescale?: number;
  /** Multiply the result by this after reducing (float32 only). */
  postscale?: number;
  compression?: Compression;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
/** One data-channel message worth of payload: big enough to keep WebRTC busy, small enough to pipeline. */
export const DEFAULT_SEGMENT_BYTES = 256 * 1024 - 16;

export function dtypeOf(t: Tensor): DType {
  return t instanceof Float32Array ? 'float32' : 'int32';
}

export function emptyLike(t: Tensor, length: number): Tensor {
  return t instanceof Float32Array ? new Float32Array(length) : new Int32Array(length);
}
