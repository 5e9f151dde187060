/**
 * The f64 CPU reference of seeded dropout: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

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
