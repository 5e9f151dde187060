/**
 * float16 on the wire: float32 tensors travel as IEEE half floats (half the
 * bytes) and are widened again on arrival. Conversion rounds to nearest even.
 * Values beyond the half range (|x| > 65504) saturate to ±65504 rather than
 * becoming Infinity, so compression can cost precision but never yields a
 * non-finite value out of finite inputs. NaN and ±Infinity pass through.
 */

export const FP16_MAX = 65504;

let widenTable: Float32Array | null = null;

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** All 65536 half values, widened once: decoding is then one lookup per element. */
function table(): Float32Array {
  if (!widenTable) {
    widenTable = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) widenTable[h] = halfToFloat(h);
  }
  return widenTable;
}

type HalfArrayConstructor = new (
  buffer: ArrayBufferLike,
  byteOffset: number,
  length: number,
) => { set(src: ArrayLike<number>): void };
/** Native Float16Array where the runtime has one (Deno, recent browsers); Node 20 has not. */
const NativeHalf = (globalThis as { Float16Array?: HalfArrayConstructor }).Float16Array;

/** Narrows `src` into `dst` (same length) as half-float bit patterns. */
export function float32ToFloat16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  if (!NativeHalf) return float32ToFloat16Portable(src, dst);
  // The engine rounds to nearest even like we do, but overflows to Infinity: saturate those.
  new NativeHalf(dst.buffer, dst.byteOffset, dst.length).set(src);
  for (let i = 0; i < dst.length; i++) {
    if ((dst[i] & 0x7fff) === 0x7c00 && Number.isFinite(src[i])) dst[i] = (dst[i] & 0x8000) | 0x7bff;
  }
  return dst;
}

/** The same narrowing in plain JS, for runtimes without Float16Array. */
export function float32ToFloat16Portable(
  src: Float32Array,
  dst: Uint16Array = new Uint16Array(src.length),
): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i];
    const abs = x & 0x7fffffff;
    // The common case first: the value is a normal half (2^-14 <= |x| < 65520 after rounding).
    if (abs >= 0x38800000 && abs < 0x477ff000) {
      // Rebias the exponent and round the 13 dropped mantissa bits to nearest even, carry included.
      dst[i] = ((x >>> 16) & 0x8000) | ((abs - 0x38000000 + 0xfff + ((abs >>> 13) & 1)) >>> 13);
    } else {
      dst[i] = narrowRare(x);
    }
  }
  return dst;
}

/** Zero, subnormal halves, overflow (saturates at ±65504), infinities and NaN. */
function narrowRare(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return mant ? 0x7e00 : sign | 0x7c00; // NaN and ±Infinity stay what they are
  const e = exp - 112; // rebias 127 -> 15
  if (e > 0) return sign | 0x7bff; // finite but too big: saturate
  if (e < -10) return sign; // rounds to (signed) zero
  // Subnormal half: shift the mantissa, implicit bit included, and round to nearest even.
  mant |= 0x800000;
  const shift = 14 - e;
  let h = mant >>> shift;
  const rem = mant & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && h & 1)) h++;
  return sign | h;
}

/**
 * Narrowing as IEEE arithmetic does it, for float16 tensors (not wire
 * compression): a finite value that rounds past 65504 becomes ±Infinity, so an
 * overflowing float16 sum shows up instead of hiding at the largest half.
 */
export function float32ToFloat16Ieee(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  float32ToFloat16(src, dst);
  for (let i = 0; i < dst.length; i++) {
    // 65520 is half-way between 65504 and 65536 (Infinity) and ties to the even one, Infinity.
    if ((dst[i] & 0x7fff) === 0x7bff && Math.abs(src[i]) >= 65520) dst[i] = (dst[i] & 0x8000) | 0x7c00;
  }
  return dst;
}

/** Widens half-float bit patterns back to float32 (one table lookup each). */
export function float16ToFloat32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const t = table();
  for (let i = 0; i < src.length; i++) dst[i] = t[src[i]];
  return dst;
}
