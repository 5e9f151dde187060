/**
 * Count sketches (src/collectives/robust/sketch.ts): linear, the same piece by piece
 * as whole, and their cosines estimate the vectors' cosines.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../src/core/random.ts';
import {
  checkBuckets,
  coordinateMedian,
  cosine,
  sketch,
  mix32,
  sketchInto,
  sketchTogetherInto,
  stepSeed,
} from '../../src/collectives/robust/sketch.ts';

function gaussian(n: number, seed: number): Float32Array {
  const r = mulberry32(seed);
  return Float32Array.from({ length: n }, () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r()));
}

describe('count sketches', () => {
  it('are linear: the sketch of a sum is the sum of the sketches (to f64 rounding)', () => {
    const a = gaussian(5000, 1);
    const b = gaussian(5000, 2);
    const sum = Float64Array.from(a, (v, i) => v + b[i]);
    const seed = stepSeed(7, 3);
    const [sa, sb, ss] = [sketch(a, 64, seed), sketch(b, 64, seed), sketch(sum, 64, seed)];
    for (let i = 0; i < 64; i++) expect(ss[i]).toBeCloseTo(sa[i] + sb[i], 9);
    // Another seed is another map.
    expect(Array.from(sketch(a, 64, seed + 1))).not.toEqual(Array.from(sa));
  });

  it("piece by piece at their offsets equals whole, and keep each bucket's absolute mass", () => {
    const x = gaussian(1000, 3);
    const whole = new Float64Array(16);
    const mass = new Float64Array(16);
    sketchInto(whole, x, 99, 0, mass);
    const parts = new Float64Array(16);
    for (const [from, to] of [
      [0, 137],
      [137, 600],
      [600, 1000],
    ])
      sketchInto(parts, x.subarray(from, to), 99, from);
    for (let i = 0; i < 16; i++) expect(parts[i]).toBeCloseTo(whole[i], 10);
    const total = x.reduce((s, v) => s + Math.abs(v), 0);
    expect(mass.reduce((s, v) => s + v, 0)).toBeCloseTo(total, 6);
    for (let i = 0; i < 16; i++) expect(Math.abs(whole[i])).toBeLessThanOrEqual(mass[i] + 1e-9);
  });

  it('are the plain signed count sketch bit for bit (a reference that branches on the sign), zeros, signed zeros and huge values included', () => {
    const x = gaussian(3000, 6).map((v, i) => (i % 7 === 0 ? 0 : i % 11 === 0 ? -0 : i % 13 === 0 ? v * 1e30 : v));
    const seed = stepSeed(3, 9);
    const reference = new Float64Array(32);
    const referenceMass = new Float64Array(32);
    for (let j = 0; j < x.length; j++) {
      const h = mix32((500 + j) ^ seed) ^ Math.imul(seed, 0x27d4eb2f);
      reference[(h >>> 1) & 31] += h & 1 ? -x[j] : x[j];
      referenceMass[(h >>> 1) & 31] += Math.abs(x[j]);
    }
    const out = new Float64Array(32);
    const mass = new Float64Array(32);
    sketchInto(out, x, seed, 500, mass);
    expect(Array.from(out)).toEqual(Array.from(reference));
    expect(Array.from(mass)).toEqual(Array.from(referenceMass));
  });

  it('taken together in one pass, are each sketchInto of the same slice bit for bit; a null vector is left alone', () => {
    const [a, b, c] = [7, 8, 9].map((s) => gaussian(4000, s));
    const seed = stepSeed(5, 1);
    const alone = (v: Float32Array, mass?: Float64Array) => {
      const out = new Float64Array(64);
      sketchInto(out, v.subarray(1000, 3500), seed, 1000, mass);
      return Array.from(out);
    };
    const outs = [0, 1, 2, 3].map(() => new Float64Array(64).fill(5));
    const mass = new Float64Array(64);
    sketchTogetherInto(outs, [a, null, b, c], seed, 1000, 2500, mass);
    const aloneMass = new Float64Array(64);
    expect(Array.from(outs[0])).toEqual(alone(a, aloneMass));
    expect(Array.from(mass)).toEqual(Array.from(aloneMass));
    expect(Array.from(outs[1])).toEqual(new Array(64).fill(5));
    expect(Array.from(outs[2])).toEqual(alone(b));
    expect(Array.from(outs[3])).toEqual(alone(c));
  });

  it('estimate cosines to about 1/sqrt(k): +0.5, -0.5 and 0 between 20,000-long vectors', () => {
    const n = 20000;
    const u = gaussian(n, 4);
    const v = gaussian(n, 5);
    for (const c of [0.5, -0.5, 0]) {
      // w has cosine c with u.
      const w = Float32Array.from(u, (x, i) => c * x + Math.sqrt(1 - c * c) * v[i]);
      const exact = cosine(u, w);
      for (let step = 0; step < 5; step++) {
        const seed = stepSeed(11, step);
        expect(Math.abs(cosine(sketch(u, 256, seed), sketch(w, 256, seed)) - exact)).toBeLessThan(4 / Math.sqrt(256));
      }
    }
  });

  it('step seeds are the same on every call and differ by step and job seed', () => {
    expect(stepSeed(1, 2)).toBe(stepSeed(1, 2));
    const seeds = new Set([0, 1, 2, 3].flatMap((s) => [0, 1, 2, 100].map((t) => stepSeed(s, t))));
    expect(seeds.size).toBe(16);
  });

  it('refuse a bucket count that is not a power of two', () => {
    for (const k of [0, 3, 100, 1.5, -4]) expect(() => checkBuckets(k)).toThrow(/power-of-two/);
    expect(() => checkBuckets(256)).not.toThrow();
  });

  it('coordinate-wise median ignores one wild row', () => {
    const m = coordinateMedian([
      [1, 2, 3],
      [1.2, 2.2, 2.8],
      [-100, 500, -1e9],
    ]);
    expect(Array.from(m)).toEqual([1, 2.2, 2.8]);
  });
});
