/**
 * CPU references (float64, plain loops) for the neural-network kernels:
 * layer norm, GELU (erf), row softmax, cross-entropy with ignored targets,
 * embedding, causal multi-head attention and seeded dropout. Each gives the
 * forward and the backward; they are the oracles the WGSL kernels are tested
 * against and the `cpu` half of the ops in src/nn/ops. Written for clarity,
 * not speed.
 */

import { erf } from '../../core/erf.ts';

type Vec = ArrayLike<number>;

// ---- layer norm over the last dimension -------------------------------------------------------

export function layerNormRef(x: Vec, w: Vec, b: Vec, rows: number, cols: number, eps = 1e-5): { y: Float64Array; mean: Float64Array; rstd: Float64Array } {
  const y = new Float64Array(rows * cols);
  const mean = new Float64Array(rows);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += x[r * cols + c];
    const m = s / cols;
    let v = 0;
    for (let c = 0; c < cols; c++) v += (x[r * cols + c] - m) ** 2;
    const rs = 1 / Math.sqrt(v / cols + eps);
    for (let c = 0; c < cols; c++) y[r * cols + c] = (x[r * cols + c] - m) * rs * w[c] + b[c];
    mean[r] = m;
    rstd[r] = rs;
  }
  return { y, mean, rstd };
}

export function layerNormBackwardRef(x: Vec, w: Vec, dy: Vec, rows: number, cols: number, eps = 1e-5): { dx: Float64Array; dw: Float64Array; db: Float64Array } {
  const { mean, rstd } = layerNormRef(x, w, new Float64Array(cols), rows, cols, eps);
  const dx = new Float64Array(rows * cols);
  const dw = new Float64Array(cols);
  const db = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const xhat = (c: number) => (x[r * cols + c] - mean[r]) * rstd[r];
    let sg = 0;
    let sgx = 0;
    for (let c = 0; c < cols; c++) {
      const g = dy[r * cols + c] * w[c];
      sg += g;
      sgx += g * xhat(c);
      dw[c] += dy[r * cols + c] * xhat(c);
      db[c] += dy[r * cols + c];
    }
    for (let c = 0; c < cols; c++) dx[r * cols + c] = rstd[r] * (dy[r * cols + c] * w[c] - sg / cols - (xhat(c) * sgx) / cols);
  }
  return { dx, dw, db };
}

// ---- GELU, exact (erf) form ---------------------------------------------------------------------

/** erf in f64: the CPU transformer reference's (src/reference/math.ts), so both oracles use one. */
export { erf };

export function normalCdf(x: number): number {
  return 0.5 * (1 + erf(x / Math.SQRT2));
}

export const geluRef = {
  f: (x: number): number => x * normalCdf(x),
  df: (x: number): number => normalCdf(x) + (x * Math.exp(-0.5 * x * x)) / Math.sqrt(2 * Math.PI),
};

// ---- row softmax ----------------------------------------------------------------------------------

export function softmaxRef(x: Vec, rows: number, cols: number): Float64Array {
  const y = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, x[r * cols + c]);
    let s = 0;
    for (let c = 0; c < cols; c++) s += Math.exp(x[r * cols + c] - m);
    for (let c = 0; c < cols; c++) y[r * cols + c] = Math.exp(x[r * cols + c] - m) / s;
  }
  return y;
}

/** dx from the softmax output y and dy. */
export function softmaxBackwardRef(y: Vec, dy: Vec, rows: number, cols: number): Float64Array {
  const dx = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += dy[r * cols + c] * y[r * cols + c];
    for (let c = 0; c < cols; c++) dx[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
  }
  return dx;
}

// ---- cross-entropy with ignored targets ---------------------------------------------------------

export interface CrossEntropyRef {
  /** Mean over counted positions (0 when none). */
  loss: number;
  count: number;
  correct: number;
  lossRows: Float64Array;
  /** Gradient of the mean loss. */
  dlogits: Float64Array;
}

/** Targets < 0 are ignored (no loss, no gradient, not counted). */
export function crossEntropyRef(logits: Vec, targets: Vec, positions: number, classes: number): CrossEntropyRef {
  const lossRows = new Float64Array(positions);
  const dlogits = new Float64Array(positions * classes);
  let count = 0;
  let correct = 0;
  let total = 0;
  for (let r = 0; r < positions; r++) {
    const t = targets[r];
    if (t < 0) continue;
    let best = 0;
    for (let j = 1; j < classes; j++) if (logits[r * classes + j] > logits[r * classes + best]) best = j;
    const m = logits[r * classes + best];
    let s = 0;
    for (let j = 0; j < classes; j++) s += Math.exp(logits[r * classes + j] - m);
    lossRows[r] = Math.log(s) - (logits[r * classes + t] - m);
    for (let j = 0; j < classes; j++) dlogits[r * classes + j] = Math.exp(logits[r * classes + j] - m) / s - (j === t ? 1 : 0);
    count++;
    total += lossRows[r];
    if (best === t) correct++;
  }
  const inv = 1 / Math.max(count, 1);
  for (let i = 0; i < dlogits.length; i++) dlogits[i] *= inv;
  return { loss: total * inv, count, correct, lossRows, dlogits };
}

// ---- embedding ------------------------------------------------------------------------------------

export function embeddingRef(ids: Vec, weight: Vec, rows: number, dim: number): Float64Array {
  const out = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) for (let c = 0; c < dim; c++) out[r * dim + c] = weight[ids[r] * dim + c];
  return out;
}

export function embeddingBackwardRef(ids: Vec, dy: Vec, rows: number, vocab: number, dim: number): Float64Array {
  const dw = new Float64Array(vocab * dim);
  for (let r = 0; r < rows; r++) for (let c = 0; c < dim; c++) dw[ids[r] * dim + c] += dy[r * dim + c];
  return dw;
}

// ---- multi-head self-attention over packed qkv [batch, T, 3·width] ------------------------------

export interface AttentionDims {
  batch: number;
  T: number;
  heads: number;
  width: number;
  causal?: boolean;
}

function attentionIndex(s: AttentionDims) {
  const hd = s.width / s.heads;
  return {
    hd,
    scale: 1 / Math.sqrt(hd),
    at: (b: number, t: number, part: number, h: number, j: number) => (b * s.T + t) * 3 * s.width + part * s.width + h * hd + j,
    out: (b: number, t: number, h: number, j: number) => (b * s.T + t) * s.width + h * hd + j,
    visible: (t: number, u: number) => s.causal === false || u <= t,
  };
}

/** y [batch, T, width] and the attention probabilities [batch, heads, T, T]. */
export function attentionRef(qkv: Vec, s: AttentionDims): { y: Float64Array; probs: Float64Array } {
  const { hd, scale, at, out, visible } = attentionIndex(s);
  const y = new Float64Array(s.batch * s.T * s.width);
  const probs = new Float64Array(s.batch * s.heads * s.T * s.T);
  for (let b = 0; b < s.batch; b++)
    for (let h = 0; h < s.heads; h++)
      for (let t = 0; t < s.T; t++) {
        const row = ((b * s.heads + h) * s.T + t) * s.T;
        const z: number[] = [];
        for (let u = 0; u < s.T; u++) {
          if (!visible(t, u)) continue;
          let d = 0;
          for (let j = 0; j < hd; j++) d += qkv[at(b, t, 0, h, j)] * qkv[at(b, u, 1, h, j)];
          z[u] = d * scale;
        }
        const m = Math.max(...z.filter((v) => v !== undefined));
        let sum = 0;
        z.forEach((v, u) => (sum += Math.exp(v - m)));
        z.forEach((v, u) => (probs[row + u] = Math.exp(v - m) / sum));
        for (let j = 0; j < hd; j++) {
          let acc = 0;
          for (let u = 0; u < s.T; u++) acc += probs[row + u] * qkv[at(b, u, 2, h, j)];
          y[out(b, t, h, j)] = acc;
        }
      }
  return { y, probs };
}

/** dqkv from dy (recomputes the probabilities). */
export function attentionBackwardRef(qkv: Vec, dy: Vec, s: AttentionDims): Float64Array {
  const { hd, scale, at, out } = attentionIndex(s);
  const { probs } = attentionRef(qkv, s);
  const dqkv = new Float64Array(qkv.length);
  for (let b = 0; b < s.batch; b++)
    for (let h = 0; h < s.heads; h++)
      for (let t = 0; t < s.T; t++) {
        const row = ((b * s.heads + h) * s.T + t) * s.T;
        const dp = new Float64Array(s.T);
        let pdp = 0;
        for (let u = 0; u < s.T; u++) {
          for (let j = 0; j < hd; j++) dp[u] += dy[out(b, t, h, j)] * qkv[at(b, u, 2, h, j)];
          pdp += probs[row + u] * dp[u];
        }
        for (let u = 0; u < s.T; u++) {
          const p = probs[row + u];
          const ds = p * (dp[u] - pdp);
          for (let j = 0; j < hd; j++) {
            dqkv[at(b, t, 0, h, j)] += scale * ds * qkv[at(b, u, 1, h, j)];
            dqkv[at(b, u, 1, h, j)] += scale * ds * qkv[at(b, t, 0, h, j)];
            dqkv[at(b, u, 2, h, j)] += p * dy[out(b, t, h, j)];
          }
        }
      }
  return dqkv;
}

// ---- seeded dropout -------------------------------------------------------------------------------

function mix32(v: number): number {
  let h = v >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** The keep mask of step `step`: 1 where element i survives, as shaders/dropout.wgsl computes it. */
export function dropoutMaskRef(n: number, p: number, seed: number, step: number): Uint8Array {
  const threshold = Math.min(Math.floor(p * 2 ** 32), 2 ** 32 - 1);
  const salt = mix32(seed ^ mix32((step + 0x9e3779b9) >>> 0));
  return Uint8Array.from({ length: n }, (_, i) => (mix32((i ^ salt) >>> 0) >= threshold ? 1 : 0));
}

/** Forward and backward are the same map: v · mask / (1 − p). */
export function dropoutRef(v: Vec, p: number, seed: number, step: number): Float64Array {
  const mask = dropoutMaskRef(v.length, p, seed, step);
  return Float64Array.from(v, (x, i) => (mask[i] ? x / (1 - p) : 0));
}
