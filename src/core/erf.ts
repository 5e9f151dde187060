/**
 * The error function in f64, shared by the CPU oracles of the GPU kernels and
 * by the CPU reference transformer (the exact GELU needs it; JavaScript's Math
 * has no erf).
 */

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
