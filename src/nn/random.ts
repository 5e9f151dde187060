/** Seeded randomness for initialisation: the same seed gives the same model in every runtime. */
import { mulberry32 } from '../core/random.ts';

/** Uniform in [0, 1) from a seed: the project's one generator (src/core/random.ts). */
export const seededUniform: (seed: number) => () => number = mulberry32;

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
export function initTensor(
  out: Float32Array,
  kind: InitKind,
  fanIn: number,
  fanOut: number,
  rand: { uniform: () => number; normal: () => number },
): void {
  if (kind === 'zeros') return void out.fill(0);
  if (kind === 'he') {
    const std = Math.sqrt(2 / fanIn);
    for (let i = 0; i < out.length; i++) out[i] = rand.normal() * std;
    return;
  }
  const limit = Math.sqrt(6 / (fanIn + fanOut));
  for (let i = 0; i < out.length; i++) out[i] = (2 * rand.uniform() - 1) * limit;
}
