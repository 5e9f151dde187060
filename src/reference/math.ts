/**
 * f64 building blocks of the CPU reference models: linear layers with PyTorch's
 * weight layout, layer norm, the exact (erf) GELU, a numerically stable
 * log-softmax. Plain loops over Float64Array: written to be read and trusted,
 * not to be fast.
 */

/** y[n × out] = x[n × in] · Wᵀ + b, with W stored [out, in] as nn.Linear stores it. */
export function linear(x: Float64Array, n: number, inSize: number, weight: Float64Array, bias: Float64Array, outSize: number): Float64Array {
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
export function layerNorm(x: Float64Array, n: number, d: number, weight: Float64Array, bias: Float64Array, eps = LAYER_NORM_EPS): Float64Array {
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

/**
 * erf to about 1e-15: its Maclaurin series below 2.5 (where the terms stay
 * small enough not to cancel badly), and above that erfc's continued fraction
 * erfc(x) = e^{-x²}/√π · 1/(x + (1/2)/(x + (2/2)/(x + (3/2)/(x + …)))),
 * which converges fast for large x.
 */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  if (a < 2.5) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 200; n++) {
      term *= (-a * a) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * ((2 / Math.sqrt(Math.PI)) * sum);
  }
  if (a > 6) return Math.sign(x); // erfc(6) ≈ 2e-17: below f64 resolution next to 1
  let tail = a;
  for (let n = 60; n >= 1; n--) tail = a + n / 2 / tail;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / tail;
  return Math.sign(x) * (1 - erfc);
}

/** nn.GELU's default (approximate='none'): x·Φ(x) = x/2 · (1 + erf(x/√2)). */
export function gelu(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
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
