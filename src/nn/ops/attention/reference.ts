/**
 * The f64 CPU reference of multi-head self-attention over packed qkv [batch, T, 3·width]: the op's oracle (its `cpu`
 * half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

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
    // Offsets of element 0 of a head's vector: q (part 0), k (1) or v (2) in qkv, and in y or dy.
    at: (b: number, t: number, part: number, h: number) => (b * s.T + t) * 3 * s.width + part * s.width + h * hd,
    out: (b: number, t: number, h: number) => (b * s.T + t) * s.width + h * hd,
    visible: (t: number, u: number) => s.causal === false || u <= t,
  };
}

/**
 * y [batch, T, width], the attention probabilities [batch, heads, T, T] and each query row's
 * log-sum-exp of its scaled scores [batch, heads, T] (what the tiled kernel saves instead of probs).
 */
export function attentionRef(qkv: Vec, s: AttentionDims): { y: Float64Array; probs: Float64Array; lse: Float64Array } {
  const { hd, scale, at, out, visible } = attentionIndex(s);
  const y = new Float64Array(s.batch * s.T * s.width);
  const probs = new Float64Array(s.batch * s.heads * s.T * s.T);
  const lse = new Float64Array(s.batch * s.heads * s.T);
  for (let b = 0; b < s.batch; b++)
    for (let h = 0; h < s.heads; h++)
      for (let t = 0; t < s.T; t++) {
        const row = ((b * s.heads + h) * s.T + t) * s.T;
        const z: number[] = [];
        const q = at(b, t, 0, h);
        for (let u = 0; u < s.T; u++) {
          if (!visible(t, u)) continue;
          const k = at(b, u, 1, h);
          let d = 0;
          for (let j = 0; j < hd; j++) d += qkv[q + j] * qkv[k + j];
          z[u] = d * scale;
        }
        const m = Math.max(...z.filter((v) => v !== undefined));
        let sum = 0;
        z.forEach((v, u) => (sum += Math.exp(v - m)));
        lse[row / s.T] = m + Math.log(sum);
        z.forEach((v, u) => (probs[row + u] = Math.exp(v - m) / sum));
        for (let j = 0; j < hd; j++) {
          let acc = 0;
          for (let u = 0; u < s.T; u++) acc += probs[row + u] * qkv[at(b, u, 2, h) + j];
          y[out(b, t, h) + j] = acc;
        }
      }
  return { y, probs, lse };
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
        const [q, g] = [at(b, t, 0, h), out(b, t, h)];
        const dp = new Float64Array(s.T);
        let pdp = 0;
        for (let u = 0; u < s.T; u++) {
          const v = at(b, u, 2, h);
          for (let j = 0; j < hd; j++) dp[u] += dy[g + j] * qkv[v + j];
          pdp += probs[row + u] * dp[u];
        }
        for (let u = 0; u < s.T; u++) {
          const p = probs[row + u];
          const ds = p * (dp[u] - pdp);
          const [k, v] = [at(b, u, 1, h), at(b, u, 2, h)];
          for (let j = 0; j < hd; j++) {
            dqkv[q + j] += scale * ds * qkv[k + j];
            dqkv[k + j] += scale * ds * qkv[q + j];
            dqkv[v + j] += p * dy[g + j];
          }
        }
      }
  return dqkv;
}
