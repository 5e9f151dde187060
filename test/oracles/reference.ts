/**
 * CPU references for the dense kernels, in float64 with plain loops: the
 * oracles every WGSL kernel is compared against. Written for clarity, not speed.
 */

export function matmulRef(
  a: Float32Array,
  b: Float32Array,
  m: number,
  n: number,
  k: number,
  transA = false,
  transB = false,
): Float64Array {
  const c = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let q = 0; q < k; q++) s += (transA ? a[q * m + i] : a[i * k + q]) * (transB ? b[j * k + q] : b[q * n + j]);
      c[i * n + j] = s;
    }
  }
  return c;
}

export function addBiasRef(y: Float32Array, bias: Float32Array, rows: number, cols: number): Float64Array {
  return Float64Array.from(y, (v, i) => v + bias[i % cols]);
}

export function biasGradRef(dy: Float32Array, rows: number, cols: number): Float64Array {
  const out = new Float64Array(cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c] += dy[r * cols + c];
  return out;
}

export interface SoftmaxXentRef {
  lossRows: Float64Array;
  correct: Float64Array;
  dLogits: Float64Array;
  meanLoss: number;
}

export function softmaxXentRef(
  logits: Float32Array,
  labels: ArrayLike<number>,
  batch: number,
  classes: number,
): SoftmaxXentRef {
  const lossRows = new Float64Array(batch);
  const correct = new Float64Array(batch);
  const dLogits = new Float64Array(batch * classes);
  for (let r = 0; r < batch; r++) {
    const row = logits.subarray(r * classes, (r + 1) * classes);
    let best = 0;
    for (let j = 1; j < classes; j++) if (row[j] > row[best]) best = j;
    const max = row[best];
    let sum = 0;
    for (let j = 0; j < classes; j++) sum += Math.exp(row[j] - max);
    lossRows[r] = Math.log(sum) - (row[labels[r]] - max);
    correct[r] = best === labels[r] ? 1 : 0;
    for (let j = 0; j < classes; j++)
      dLogits[r * classes + j] = (Math.exp(row[j] - max) / sum - (j === labels[r] ? 1 : 0)) / batch;
  }
  return { lossRows, correct, dLogits, meanLoss: lossRows.reduce((a, b) => a + b, 0) / batch };
}

export function sgdRef(
  p: Float64Array,
  g: ArrayLike<number>,
  v: Float64Array,
  lr: number,
  momentum: number,
  wd: number,
): void {
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] + wd * p[i];
    v[i] = momentum * v[i] + gi;
    p[i] -= lr * v[i];
  }
}

export function adamwRef(
  p: Float64Array,
  g: ArrayLike<number>,
  m: Float64Array,
  v: Float64Array,
  step: number,
  lr: number,
  b1: number,
  b2: number,
  eps: number,
  wd: number,
): void {
  for (let i = 0; i < p.length; i++) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const mh = m[i] / (1 - b1 ** step);
    const vh = v[i] / (1 - b2 ** step);
    p[i] -= lr * (mh / (Math.sqrt(vh) + eps) + wd * p[i]);
  }
}

/** The f16 value nearest to x (round to nearest even), as a number. Overflow → ±Infinity. */
export function roundToF16(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const sign = Math.sign(x);
  const a = Math.abs(x);
  if (a >= 65520) return sign * Infinity;
  // Spacing of f16 values around a: 2^(e-10) for normals, 2^-24 for subnormals.
  const e = Math.max(Math.floor(Math.log2(a)), -14);
  const ulp = 2 ** (e - 10);
  const q = a / ulp;
  let r = Math.round(q);
  if (Math.abs(q - Math.trunc(q) - 0.5) < 1e-12) r = Math.trunc(q) % 2 === 0 ? Math.trunc(q) : Math.trunc(q) + 1;
  return sign * r * ulp;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}
