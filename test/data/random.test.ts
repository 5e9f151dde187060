import { describe, expect, it } from 'vitest';
import { mixSeed, mulberry32, permutation } from '../../src/data/random.ts';

describe('seeded randomness', () => {
  it('repeats the same stream for the same seed and differs across seeds', () => {
    const a = mulberry32(42),
      b = mulberry32(42),
      c = mulberry32(43);
    const sa = Array.from({ length: 8 }, a),
      sb = Array.from({ length: 8 }, b),
      sc = Array.from({ length: 8 }, c);
    expect(sa).toEqual(sb);
    expect(sa).not.toEqual(sc);
    for (const v of sa) expect(v >= 0 && v < 1).toBe(true);
  });

  it('draws roughly uniform values', () => {
    const r = mulberry32(7);
    const bins = new Array(10).fill(0);
    for (let i = 0; i < 100_000; i++) bins[Math.floor(r() * 10)]++;
    for (const n of bins) expect(Math.abs(n - 10_000)).toBeLessThan(500);
  });

  it('permutation is a bijection, seeded, and actually shuffles', () => {
    const p = permutation(1000, 5);
    expect([...p].sort((x, y) => x - y)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(permutation(1000, 5)).toEqual(p);
    expect(permutation(1000, 6)).not.toEqual(p);
    const fixed = p.filter((v, i) => v === i).length;
    expect(fixed).toBeLessThan(10);
  });

  it('mixSeed separates (seed, epoch) pairs that addition would merge', () => {
    expect(mixSeed(1, 2)).not.toBe(mixSeed(2, 1));
    expect(mixSeed(1, 2)).toBe(mixSeed(1, 2));
    const seen = new Set<number>();
    for (let s = 0; s < 50; s++) for (let e = 0; e < 50; e++) seen.add(mixSeed(s, e));
    expect(seen.size).toBe(2500);
  });
});
