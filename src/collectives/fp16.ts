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

/** Narrows `src` into `dst` (same length) as half-float bit patterns. */
export function float32ToFloat16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) {
    const x = bits[i];
    const sign = (x >>> 16) & 0x8000;
    const exp = (x >>> 23) & 0xff;
    let mant = x & 0x7fffff;
    if (exp === 0xff) {
      dst[i] = mant ? 0x7e00 : sign | 0x7c00; // NaN and ±Infinity stay what they are
      continue;
    }
    const e = exp - 112; // rebias 127 -> 15
    if (e >= 0x1f) {
      dst[i] = sign | 0x7bff; // saturate at ±65504
      continue;
    }
    if (e <= 0) {
      // Subnormal half (or zero): shift the mantissa, implicit bit included, and round.
      if (e < -10) {
        dst[i] = sign;
        continue;
      }
      mant |= 0x800000;
      const shift = 14 - e;
      let h = mant >>> shift;
      const rem = mant & ((1 << shift) - 1);
      const half = 1 << (shift - 1);
      if (rem > half || (rem === half && h & 1)) h++;
      dst[i] = sign | h;
      continue;
    }
    let h = (e << 10) | (mant >>> 13);
    const rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // a carry may round up into the next exponent
    dst[i] = sign | (h >= 0x7c00 ? 0x7bff : h);
  }
  return dst;
}

/** Widens half-float bit patterns back to float32. */
export function float16ToFloat32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const t = table();
  for (let i = 0; i < src.length; i++) dst[i] = t[src[i]];
  return dst;
}
