/**
 * f64 building blocks of the CPU reference models: linear layers with PyTorch's
 * weight layout, layer norm, the exact (erf) GELU, a numerically stable
 * log-softmax. Plain loops over Float64Array: written to be read and trusted,
 * not to be fast.
 */

import { erf } from '../core/erf.ts';

export { erf };

/** y[n × out] = x[n × in] · Wᵀ + b, with W stored [out, in] as nn.Linear stores it. */
export function linear(
  x: Float64Array,
  n: number,
  inSize: number,
  weight: Float64Array,
  bias: Float64Array,
  outSize: number,
): Float64Array {
  const y = new Float64Array(n * outSize);
  for (let r = 0; r < n; r++) {
    for (let o = 0; o < outSize; o++) {
      let s = bias[o];
      const w = o * inSize;
      const xr = r * inSize;
      for (let i = 0; i < inSize; i++) s += x[xr + i] * weight[w + i];
      y[r * outSize + o] = s;
    }
  }
  return y;
}

/** PyTorch's LayerNorm default epsilon. */
export const LAYER_NORM_EPS = 1e-5;

/** Each row of x[n × d] normalised to mean 0, biased variance 1, then scaled and shifted. */
export function layerNorm(
  x: Float64Array,
  n: number,
  d: number,
  weight: Float64Array,
  bias: Float64Array,
  eps = LAYER_NORM_EPS,
): Float64Array {
  const y = new Float64Array(n * d);
  for (let r = 0; r < n; r++) {
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[r * d + i];
    mean /= d;
    let variance = 0;
    for (let i = 0; i < d; i++) variance += (x[r * d + i] - mean) ** 2;
    variance /= d;
    const rstd = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < d; i++) y[r * d + i] = (x[r * d + i] - mean) * rstd * weight[i] + bias[i];
  }
  return y;
}

/** nn.GELU's default (approximate='none'): x·Φ(x) = x/2 · (1 + erf(x/√2)). */
export function gelu(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/** nn.GELU(approximate='tanh'), GPT-2's: x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³))). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

/** log-softmax of row r of x[n × k], in place into `out`. */
export function logSoftmaxRow(x: ArrayLike<number>, r: number, k: number, out: Float64Array): void {
  let max = -Infinity;
  for (let c = 0; c < k; c++) max = Math.max(max, x[r * k + c]);
  let sum = 0;
  for (let c = 0; c < k; c++) sum += Math.exp(x[r * k + c] - max);
  const logZ = max + Math.log(sum);
  for (let c = 0; c < k; c++) out[c] = x[r * k + c] - logZ;
}
