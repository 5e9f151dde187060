/**
 * The f64 CPU reference of GELU, exact (erf) form: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
import { erf } from '../../../core/erf.ts';

/** erf in f64: the CPU transformer reference's (src/reference/math.ts), so both oracles use one. */
export { erf };

export function normalCdf(x: number): number {
  return 0.5 * (1 + erf(x / Math.SQRT2));
}

export const geluRef = {
  f: (x: number): number => x * normalCdf(x),
  df: (x: number): number => normalCdf(x) + (x * Math.exp(-0.5 * x * x)) / Math.sqrt(2 * Math.PI),
};
