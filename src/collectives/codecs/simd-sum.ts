/**
 * Float32 sums with WebAssembly SIMD: four lanes per instruction. A plain JavaScript loop over
 * Float32Arrays cost 4 ns an element on the project's machine under Node 20 (each element widened
 * to float64 and rounded back), and it was the largest cost of a TCP ring allreduce once the
 * transport stopped allocating; copying both operands into the module's memory, adding there and
 * copying the sum back cost 1 ns. An f32x4.add rounds each lane as float32 addition does, which is
 * what the loop's float64 sum rounded to float32 gives as well: the bits are the same either way.
 *
 * The module is small enough to compile synchronously everywhere (browsers refuse only modules
 * over 4 KB on their main thread); where WebAssembly or its SIMD is missing, callers use the loop.
 */

/** Elements per block: each operand gets 256 KiB of the module's memory. */
const BLOCK = 65536;
/** Below this a call is cheaper in the loop than in three copies. */
export const SIMD_MIN_ELEMENTS = 256;

/**
 * A function body over `out` (param 0) and `bytes` (param 2), 16 bytes a turn: one i32 local i, a
 * loop that breaks when i >= bytes, `out + i` on the stack for the store, `v128` the turn's work
 * (leaving the vector to store), then i += 16.
 */
const loop16 = (v128: number[]) => [
  ...[0x01, 0x01, 0x7f], // one local, i32: i
  ...[0x02, 0x40, 0x03, 0x40], // block, loop
  ...[0x20, 0x03, 0x20, 0x02, 0x4f, 0x0d, 0x01], // break when i >= bytes (unsigned)
  ...[0x20, 0x00, 0x20, 0x03, 0x6a], // out + i: where the result goes
  ...[0x20, 0x00, 0x20, 0x03, 0x6a, 0xfd, 0x00, 0x02, 0x00], // v128.load out + i
  ...v128,
  ...[0xfd, 0x0b, 0x02, 0x00], // v128.store
  ...[0x20, 0x03, 0x41, 0x10, 0x6a, 0x21, 0x03], // i += 16
  ...[0x0c, 0x00, 0x0b, 0x0b, 0x0b], // next; end loop, block, function
];
// add(out, b, bytes): out[i..i+16] = f32x4.add(out[i..], b[i..]).
const ADD_BODY = loop16([
  ...[0x20, 0x01, 0x20, 0x03, 0x6a, 0xfd, 0x00, 0x02, 0x00], // v128.load b + i
  ...[0xfd, 0xe4, 0x01], // f32x4.add
]);
// scale(out, k: f32, bytes): out[i..i+16] = f32x4.mul(out[i..], f32x4.splat(k)).
const SCALE_BODY = loop16([
  ...[0x20, 0x01, 0xfd, 0x13], // f32x4.splat k
  ...[0xfd, 0xe6, 0x01], // f32x4.mul
]);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));
const name = (s: string) => [s.length, ...ascii(s)];
const EXPORTS = [0x03, ...name('memory'), 0x02, 0x00, ...name('add'), 0x00, 0x00, ...name('scale'), 0x00, 0x01];
const CODE = [0x02, ADD_BODY.length, ...ADD_BODY, SCALE_BODY.length, ...SCALE_BODY];
const MODULE = new Uint8Array([
  ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
  ...[0x01, 0x0d, 0x02], // types, two:
  ...[0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00], // (i32, i32, i32) -> (): add
  ...[0x60, 0x03, 0x7f, 0x7d, 0x7f, 0x00], // (i32, f32, i32) -> (): scale
  ...[0x03, 0x03, 0x02, 0x00, 0x01], // functions: add of type 0, scale of type 1
  ...[0x05, 0x03, 0x01, 0x00, 0x08], // memory: 8 pages (512 KiB), two blocks
  ...[0x07, EXPORTS.length, ...EXPORTS], // exports
  ...[0x0a, CODE.length, ...CODE], // code
]);

interface SimdAdd {
  memory: Float32Array;
  add: (out: number, b: number, bytes: number) => void;
  scale: (out: number, k: number, bytes: number) => void;
}

function instantiate(): SimdAdd | null {
  try {
    if (typeof WebAssembly === 'undefined' || !WebAssembly.validate(MODULE)) return null;
    const exports = new WebAssembly.Instance(new WebAssembly.Module(MODULE)).exports;
    return {
      memory: new Float32Array((exports.memory as WebAssembly.Memory).buffer),
      add: exports.add as SimdAdd['add'],
      scale: exports.scale as SimdAdd['scale'],
    };
  } catch {
    return null;
  }
}

const simd = instantiate();

/** Whether sums go through SIMD here. */
export const simdAvailable = simd !== null;

/**
 * Walks `n` elements in blocks of at most BLOCK, a whole number of lanes each, handing `block` each
 * one's start and length; returns where the tail the lanes do not cover (under 4 elements) starts.
 */
function byBlocks(n: number, block: (start: number, length: number) => void): number {
  let o = 0;
  while (n - o >= 4) {
    const length = Math.min(BLOCK, n - o) & ~3;
    block(o, length);
    o += length;
  }
  return o;
}

/**
 * `out[i] = a[i] + b[i]` (`out` may be `a`), by blocks through the module's memory; false (and
 * nothing written) where SIMD is missing.
 */
export function simdSumTo(out: Float32Array, a: Float32Array, b: Float32Array): boolean {
  if (!simd) return false;
  const { memory, add } = simd;
  const n = out.length;
  const tail = byBlocks(n, (o, k) => {
    memory.set(a.subarray(o, o + k), 0);
    memory.set(b.subarray(o, o + k), BLOCK);
    add(0, BLOCK * 4, k * 4);
    out.set(memory.subarray(0, k), o);
  });
  for (let o = tail; o < n; o++) out[o] = a[o] + b[o];
  return true;
}

/**
 * `t[i] *= k` by blocks through the module's memory, where that gives the loop's bits: k must be a
 * float32 (a power of two, as an average's 1/N on 2, 4, 8 ranks is), for then the float64 product of
 * two float32s is exact and the loop rounds it to float32 as f32x4.mul does. False (nothing written)
 * where SIMD is missing or k is not a float32: the caller scales in the loop.
 */
export function simdScale(t: Float32Array, k: number): boolean {
  if (!simd || Math.fround(k) !== k) return false;
  const { memory, scale } = simd;
  const n = t.length;
  const tail = byBlocks(n, (o, c) => {
    memory.set(t.subarray(o, o + c), 0);
    scale(0, k, c * 4);
    t.set(memory.subarray(0, c), o);
  });
  for (let o = tail; o < n; o++) t[o] *= k;
  return true;
}
