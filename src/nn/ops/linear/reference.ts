/**
 * f64 references for linear's f16-mixed path: f16 rounding, and x·Wᵀ (+ b) with x and W rounded
 * to f16 and everything else exact, what the f16 kernels compute up to their f32 sums.
 */

const F16_MAX = 65504;
/** The smallest normal f16, 2⁻¹⁴; below it the spacing stays 2⁻²⁴ (subnormals). */
const F16_MIN_NORMAL = 2 ** -14;

/** x rounded to the nearest f16 (ties to even); ±Infinity past f16's range. */
export function roundF16(x: number): number {
  const a = Math.abs(x);
  if (!Number.isFinite(x) || a === 0) return x;
  // Half way between 65504 and the next step (65536) rounds up, out of range.
  if (a >= F16_MAX + 16) return Math.sign(x) * Infinity;
  let exponent = Math.floor(Math.log2(Math.max(a, F16_MIN_NORMAL)));
  // log2 may land one off at an exact power of two.
  if (2 ** exponent > Math.max(a, F16_MIN_NORMAL)) exponent--;
  else if (2 ** (exponent + 1) <= Math.max(a, F16_MIN_NORMAL)) exponent++;
  const step = 2 ** (exponent - 10);
  const q = a / step;
  const floor = Math.floor(q);
  const rest = q - floor;
  const units = rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  return Math.sign(x) * units * step;
}

/** y = round16(x)·round16(W)ᵀ (+ b), summed in f64: x [rows, inF], W [outF, inF]. */
export function linearF16Reference(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  b: ArrayLike<number> | null,
  rows: number,
  inF: number,
  outF: number,
): Float64Array {
  const xr = Float64Array.from(x, roundF16);
  const wr = Float64Array.from(w, roundF16);
  const y = new Float64Array(rows * outF);
  for (let r = 0; r < rows; r++)
    for (let o = 0; o < outF; o++) {
      let s = b ? b[o] : 0;
      for (let i = 0; i < inF; i++) s += xr[r * inF + i] * wr[o * inF + i];
      y[r * outF + o] = s;
    }
  return y;
}
