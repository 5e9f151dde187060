/**
 * The SIMD float32 sum gives the bits the plain loop gives (the CPU oracle here), at every length
 * around its blocks and lanes, with the values that round or propagate differently if anything is off:
 * NaN, infinities, signed zeros, subnormals, and pairs whose sum needs rounding.
 */
import { describe, expect, it } from 'vitest';
import { reduceInto, reduceTo, scaleInPlace } from '../../src/collectives/codecs/reduce.ts';
import { simdAvailable, simdScale, simdSumTo } from '../../src/collectives/codecs/simd-sum.ts';

const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 1e-45, -1e-45, 1.17e-38, 3.4e38, -3.4e38, 1, 1 + 2 ** -23];

/** Deterministic float32 values: mostly random magnitudes and signs, every 17th a special one. */
function values(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out[i] = i % 17 === 5 ? SPECIAL[x % SPECIAL.length] : (((x / 2 ** 31 - 0.5) * 2 ** ((x % 60) - 30)) as number);
  }
  return out;
}

/** The oracle: float64 sum rounded to float32, element by element. */
function loopSum(a: Float32Array, b: Float32Array): Float32Array {
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}

const sameBits = (x: Float32Array, y: Float32Array) =>
  x.every((v, i) => (Number.isNaN(v) ? Number.isNaN(y[i]) : Object.is(v, y[i])));

describe('SIMD float32 sum', () => {
  it('runs here (Node and Deno have WebAssembly SIMD)', () => {
    expect(simdAvailable).toBe(true);
  });

  for (const n of [0, 1, 3, 4, 5, 255, 256, 257, 65_536, 65_536 + 7, 3 * 65_536 + 1]) {
    it(`sums ${n} elements to the loop's bits, in place and into another array`, () => {
      const a = values(n, n + 1);
      const b = values(n, n + 2);
      const expected = loopSum(a, b);
      const into = new Float32Array(n).fill(7);
      expect(simdSumTo(into, a, b)).toBe(true);
      expect(sameBits(into, expected)).toBe(true);
      // reduceTo leaves `a` as it was; reduceInto writes into it.
      const before = a.slice();
      const viaReduceTo = new Float32Array(n);
      reduceTo('sum', viaReduceTo, a, b);
      expect(sameBits(viaReduceTo, expected) && sameBits(a, before)).toBe(true);
      reduceInto('average', a, b);
      expect(sameBits(a, expected)).toBe(true);
    });
  }

  it('works on views at any element offset of a larger buffer, touching nothing outside them', () => {
    const whole = values(70_000, 9);
    const b = values(70_000 - 13, 10);
    const untouched = whole.slice();
    const view = whole.subarray(5, 5 + b.length);
    const expected = loopSum(view, b);
    reduceInto('sum', view, b);
    expect(sameBits(view, expected)).toBe(true);
    expect(sameBits(whole.subarray(0, 5), untouched.subarray(0, 5))).toBe(true);
    expect(sameBits(whole.subarray(5 + b.length), untouched.subarray(5 + b.length))).toBe(true);
  });
});

describe('SIMD float32 scale', () => {
  /** The oracle: the loop scaleInPlace runs where SIMD does not (float64 product rounded to float32). */
  const loopScale = (t: Float32Array, k: number) => Float32Array.from(t, (v) => v * k);

  for (const k of [0.5, 0.25, 0.125, 2, -0.5])
    for (const n of [0, 3, 4, 257, 65_536 + 5, 3 * 65_536 + 1])
      it(`scales ${n} elements by ${k} to the loop's bits`, () => {
        const t = values(n, 7 * n + 3);
        const want = loopScale(t, k);
        expect(simdScale(t, k)).toBe(true);
        expect(sameBits(t, want)).toBe(true);
      });

  it('refuses a factor that is no float32 (1/3: its float32 product could round otherwise), writing nothing', () => {
    const t = values(1000, 5);
    const before = t.slice();
    expect(simdScale(t, 1 / 3)).toBe(false);
    expect(sameBits(t, before)).toBe(true);
  });

  it('scaleInPlace averages over 2 and 3 ranks to the loop’s bits, through SIMD or not', () => {
    for (const k of [1 / 2, 1 / 3]) {
      const t = values(4096, 11);
      const want = loopScale(t, k);
      scaleInPlace(t, k);
      expect(sameBits(t, want)).toBe(true);
    }
  });
});
