/**
 * Run under Deno (which has Float16Array) by fp16.test.ts: the native
 * narrowing must agree bit for bit with the portable one. Prints one JSON line.
 */
import { float32ToFloat16, float32ToFloat16Portable, float16ToFloat32 } from '../../src/collectives/codecs/fp16.ts';

const native = typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function';
const probes: number[] = [
  0,
  -0,
  1,
  -2,
  0.5,
  65504,
  65519,
  65520,
  65536,
  1e6,
  -1e6,
  2 ** -24,
  2 ** -25,
  3 * 2 ** -26,
  2 ** -14,
  1 + 2 ** -11,
  1 + 3 * 2 ** -11,
  Infinity,
  -Infinity,
  NaN,
  1e-10,
  -1e-10,
];
// Every half value, and the midpoints between neighbours (the rounding ties).
const halves = float16ToFloat32(new Uint16Array(65536).map((_, i) => i));
for (let h = 0; h < 65535; h++) probes.push(halves[h], (halves[h] + halves[h + 1]) / 2);
let seed = 7;
for (let i = 0; i < 200_000; i++) {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  probes.push(((seed / 2 ** 32) * 2 - 1) * 2 ** ((seed % 48) - 30));
}
const src = Float32Array.from(probes);
const a = float32ToFloat16(src);
const b = float32ToFloat16Portable(src);
const isNaNHalf = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
let differ = -1;
for (let i = 0; i < src.length; i++) {
  if (a[i] !== b[i] && !(isNaNHalf(a[i]) && isNaNHalf(b[i]))) {
    differ = i;
    break;
  }
}
console.log(
  JSON.stringify({
    native,
    checked: src.length,
    differ,
    value: differ >= 0 ? src[differ] : null,
    native_bits: differ >= 0 ? a[differ] : null,
    portable_bits: differ >= 0 ? b[differ] : null,
  }),
);
