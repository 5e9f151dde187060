/** Seeded randomness for initialisation: the same seed gives the same model in every runtime. */

/** mulberry32: a small, fast 32-bit generator; uniform in [0, 1). */
export function seededUniform(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal samples (Box–Muller) from a seeded uniform source. */
export function seededNormal(seed: number): () => number {
  const u = seededUniform(seed);
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const s = spare;
      spare = null;
      return s;
    }
    const r = Math.sqrt(-2 * Math.log(1 - u()));
    const theta = 2 * Math.PI * u();
    spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  };
}

export type InitKind = 'he' | 'glorot' | 'zeros';

/** Fills `out` per the scheme: He normal (std √(2/fanIn), for ReLU layers), Glorot uniform, or zeros. */
export function initTensor(out: Float32Array, kind: InitKind, fanIn: number, fanOut: number, rand: { uniform: () => number; normal: () => number }): void {
  if (kind === 'zeros') return void out.fill(0);
  if (kind === 'he') {
    const std = Math.sqrt(2 / fanIn);
    for (let i = 0; i < out.length; i++) out[i] = rand.normal() * std;
    return;
  }
  const limit = Math.sqrt(6 / (fanIn + fanOut));
  for (let i = 0; i < out.length; i++) out[i] = (2 * rand.uniform() - 1) * limit;
}
