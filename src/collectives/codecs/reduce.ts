import { float16ToFloat32, float32ToFloat16Ieee } from './fp16.ts';
import { SIMD_MIN_ELEMENTS, simdScale, simdSumTo } from './simd-sum.ts';
import type { ReduceOp, ReduceSettings, Tensor } from './types.ts';

/**
 * Element-wise reductions on the CPU: `dst[i] = dst[i] op src[i]`. One tight
 * loop per op, because a generic callback per element costs several times more.
 * Integer sums and products wrap around like C's int32_t / int8_t (the typed
 * array's store does the wrapping; int32 products need Math.imul to stay exact).
 * float16 computes in float32 and rounds back once per pair, as Horovod's CPU
 * path does; every op here is commutative, so partners that combine the same
 * two operands in either order get the same bits.
 */
export function reduceInto(op: ReduceOp, dst: Tensor, src: Tensor): void {
  if (dst instanceof Uint16Array) return reduceHalf(op, dst, src as Uint16Array);
  const n = dst.length;
  switch (op) {
    case 'sum':
    case 'average':
      // Float32 sums, the gradients', go four lanes at a time where WebAssembly SIMD runs (simd-sum.ts).
      if (dst instanceof Float32Array && n >= SIMD_MIN_ELEMENTS && simdSumTo(dst, dst, src as Float32Array)) return;
      for (let i = 0; i < n; i++) dst[i] += src[i];
      return;
    case 'product':
      if (dst instanceof Int32Array) for (let i = 0; i < n; i++) dst[i] = Math.imul(dst[i], src[i]);
      else for (let i = 0; i < n; i++) dst[i] *= src[i];
      return;
    case 'min':
      // NaN wins, as in numpy's minimum: a NaN gradient must not vanish silently.
      for (let i = 0; i < n; i++) {
        const a = dst[i],
          b = src[i];
        if (b < a || b !== b) dst[i] = b;
      }
      return;
    case 'max':
      for (let i = 0; i < n; i++) {
        const a = dst[i],
          b = src[i];
        if (b > a || b !== b) dst[i] = b;
      }
      return;
  }
}

/**
 * `out[i] = a[i] op b[i]`, the same bits as copying `a` to `out` and then `reduceInto(op, out, b)`:
 * a reduction that leaves `a` as it was (the ring's partial sums, kept apart from the caller's
 * buffer until every rank has gone ahead).
 */
export function reduceTo(op: ReduceOp, out: Tensor, a: Tensor, b: Tensor): void {
  if (out instanceof Uint16Array) {
    out.set(a as Uint16Array);
    return reduceHalf(op, out, b as Uint16Array);
  }
  const n = out.length;
  switch (op) {
    case 'sum':
    case 'average':
      if (out instanceof Float32Array && n >= SIMD_MIN_ELEMENTS && simdSumTo(out, a as Float32Array, b as Float32Array))
        return;
      for (let i = 0; i < n; i++) out[i] = a[i] + b[i];
      return;
    case 'product':
      if (out instanceof Int32Array) for (let i = 0; i < n; i++) out[i] = Math.imul(a[i], b[i]);
      else for (let i = 0; i < n; i++) out[i] = a[i] * b[i];
      return;
    case 'min':
      for (let i = 0; i < n; i++) {
        const x = a[i],
          y = b[i];
        out[i] = y < x || y !== y ? y : x;
      }
      return;
    case 'max':
      for (let i = 0; i < n; i++) {
        const x = a[i],
          y = b[i];
        out[i] = y > x || y !== y ? y : x;
      }
      return;
  }
}

/** Float32 scratch for float16 arithmetic; grows to the largest segment seen and is reused. */
let wideA = new Float32Array(0);
let wideB = new Float32Array(0);
function wide(n: number): [Float32Array, Float32Array] {
  if (wideA.length < n) {
    wideA = new Float32Array(n);
    wideB = new Float32Array(n);
  }
  return [wideA.subarray(0, n), wideB.subarray(0, n)];
}

function reduceHalf(op: ReduceOp, dst: Uint16Array, src: Uint16Array): void {
  const [a, b] = wide(dst.length);
  float16ToFloat32(dst, a);
  float16ToFloat32(src, b);
  reduceInto(op, a, b);
  float32ToFloat16Ieee(a, dst);
}

/**
 * Multiplies in place, the way Horovod scales: float32 as float32, float16
 * in float32 and rounded back, integers in float64 and truncated toward zero
 * (stored with the same wrap-around as integer sums).
 */
export function scaleInPlace(t: Tensor, factor: number): void {
  if (factor === 1) return;
  if (t instanceof Uint16Array) {
    const [a] = wide(t.length);
    float16ToFloat32(t, a);
    const f = Math.fround(factor);
    for (let i = 0; i < a.length; i++) a[i] *= f;
    float32ToFloat16Ieee(a, t);
    return;
  }
  if (t instanceof Float32Array) {
    // An average's 1/N on 2, 4, 8… ranks four lanes at a time (simd-sum.ts): half the time of the loop over the
    // ring's own chunk, a pass every rank's allgather waits for.
    if (t.length >= SIMD_MIN_ELEMENTS && simdScale(t, factor)) return;
    for (let i = 0; i < t.length; i++) t[i] *= factor;
    return;
  }
  for (let i = 0; i < t.length; i++) t[i] = Math.trunc(t[i] * factor);
}

/** Integer average: the sum divided by the number of ranks, rounded toward zero. */
export function divideIntInPlace(t: Int32Array | Int8Array, divisor: number): void {
  for (let i = 0; i < t.length; i++) t[i] = Math.trunc(t[i] / divisor);
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
