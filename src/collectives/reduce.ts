import type { ReduceOp, Tensor } from './types.ts';

/**
 * Element-wise reductions on the CPU: `dst[i] = dst[i] op src[i]`. One tight
 * loop per op, because a generic callback per element costs several times more.
 * int32 sums and products wrap around like C's int32_t.
 */
export function reduceInto(op: ReduceOp, dst: Tensor, src: Tensor): void {
  const n = dst.length;
  const isInt = dst instanceof Int32Array;
  switch (op) {
    case 'sum':
    case 'average':
      if (isInt) for (let i = 0; i < n; i++) dst[i] = (dst[i] + src[i]) | 0;
      else for (let i = 0; i < n; i++) dst[i] += src[i];
      return;
    case 'product':
      if (isInt) for (let i = 0; i < n; i++) dst[i] = Math.imul(dst[i], src[i]);
      else for (let i = 0; i < n; i++) dst[i] *= src[i];
      return;
    case 'min':
      // NaN wins, as in numpy's minimum: a NaN gradient must not vanish silently.
      for (let i = 0; i < n; i++) {
        const a = dst[i], b = src[i];
        if (b < a || b !== b) dst[i] = b;
      }
      return;
    case 'max':
      for (let i = 0; i < n; i++) {
        const a = dst[i], b = src[i];
        if (b > a || b !== b) dst[i] = b;
      }
      return;
  }
}

/** Multiplies in place (float32 only; callers reject scaling of int32). */
export function scaleInPlace(t: Float32Array, factor: number): void {
  if (factor === 1) return;
  for (let i = 0; i < t.length; i++) t[i] *= factor;
}

/** int32 average: the sum divided by the number of ranks, rounded toward zero. */
export function divideIntInPlace(t: Int32Array, divisor: number): void {
  for (let i = 0; i < t.length; i++) t[i] = Math.trunc(t[i] / divisor);
}
