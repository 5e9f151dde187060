/**
 * int8 on the wire: a float32 segment travels as one float32 scale (the
 * segment's largest magnitude over 127) followed by one signed byte per
 * element, round(x / scale). About a quarter of the bytes; each element is off
 * by at most half a step (scale / 2).
 *
 * That error is not thrown away: with error feedback the sender keeps what
 * rounding cut off (the residual) and adds it to the same position the next
 * time it sends, so over many steps the sum of what arrived equals the sum of
 * what was meant to be sent, give or take one residual (it telescopes).
 *
 * A segment holding NaN or ±Infinity gets a NaN scale, so every element of it
 * decodes to NaN: a diverged rank shows up at the receiver (the optimizer's
 * finiteness check) instead of being clamped into plausible numbers.
 */

/** Bytes before the elements: the segment's float32 scale. */
export const INT8_HEADER_BYTES = 4;
const LEVELS = 127;

/** Largest |x| of `src`, or NaN when any element is not finite. */
function maxMagnitude(src: Float32Array): number {
  let m = 0;
  for (let i = 0; i < src.length; i++) {
    const a = Math.abs(src[i]);
    if (!(a <= m)) {
      if (!Number.isFinite(a)) return NaN;
      m = a;
    }
  }
  return m;
}

/** Encodes `src` as [scale: f32 LE][q: int8 × length]. */
export function quantizeInt8(src: Float32Array): Uint8Array {
  const out = new Uint8Array(INT8_HEADER_BYTES + src.length);
  // The scale itself goes through float32, so encoder and decoder use the same one.
  const scale = Math.fround(maxMagnitude(src) / LEVELS);
  new DataView(out.buffer).setFloat32(0, scale, true);
  const q = new Int8Array(out.buffer, INT8_HEADER_BYTES, src.length);
  if (scale > 0) {
    for (let i = 0; i < src.length; i++) {
      // |x| <= 127·scale, so the rounded value is within [-127, 127] up to float rounding: clamp anyway.
      const v = Math.round(src[i] / scale);
      q[i] = v > LEVELS ? LEVELS : v < -LEVELS ? -LEVELS : v;
    }
  }
  // scale 0 (all zeros) leaves q at 0; a NaN scale decodes to NaN whatever q holds.
  return out;
}

/** Elements in an int8 payload (its length less the header). */
export function int8Count(payload: Uint8Array): number {
  return payload.byteLength - INT8_HEADER_BYTES;
}

/** Decodes a payload of quantizeInt8 into `into` (or a new array). */
export function dequantizeInt8(
  payload: Uint8Array,
  into: Float32Array = new Float32Array(int8Count(payload)),
): Float32Array {
  const scale = new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getFloat32(0, true);
  const q = new Int8Array(payload.buffer, payload.byteOffset + INT8_HEADER_BYTES, int8Count(payload));
  for (let i = 0; i < q.length; i++) into[i] = q[i] * scale;
  return into;
}

/**
 * Error feedback around a lossy encoder, in place: `residual` (same length as
 * `values`) holds what earlier sends of these positions cut off. The value
 * sent is values + residual; afterwards `values` holds what the receivers
 * decode and `residual` what this send cut off, for the next one.
 */
export function encodeWithFeedback(
  values: Float32Array,
  residual: Float32Array,
  encode: (v: Float32Array) => Uint8Array,
  decode: (payload: Uint8Array, into: Float32Array) => void,
): Uint8Array {
  for (let i = 0; i < values.length; i++) residual[i] += values[i];
  const bytes = encode(residual);
  decode(bytes, values);
  for (let i = 0; i < values.length; i++) residual[i] -= values[i];
  // A non-finite value must not poison every later step through the residual: the NaN already travels.
  if (residual.some((r) => !Number.isFinite(r))) residual.fill(0);
  return bytes;
}
