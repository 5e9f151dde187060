/** The per-step input check's fast path agrees with the exact check it stands in for. */
import { describe, expect, it } from 'vitest';
import { allValid } from '../../src/engine/graph-model.ts';

const exact = (x: Float32Array, indices: boolean) =>
  x.every((v) => Number.isFinite(v) && (!indices || (Number.isInteger(v) && v >= 0)));

describe('allValid', () => {
  it('finds NaN and ±Infinity anywhere (head, middle, the tail past a multiple of 4), and passes every finite value', () => {
    const base = Float32Array.from({ length: 1027 }, (_, i) => (i % 2 ? -1 : 1) * i * 1e-3);
    base[3] = -0;
    base[4] = 3.4e38;
    base[5] = -3.4e38;
    base[6] = 1e-45;
    expect(allValid(base, false)).toBe(true);
    for (const bad of [NaN, Infinity, -Infinity]) {
      for (const at of [0, 513, 1026]) {
        const x = base.slice();
        x[at] = bad;
        expect(allValid(x, false), `${bad} at ${at}`).toBe(false);
        expect(exact(x, false)).toBe(false);
      }
    }
    expect(allValid(new Float32Array(0), false)).toBe(true);
  });

  it('for indices, passes integers ≥ 0 and refuses fractions, negatives and non-finite values', () => {
    expect(allValid(Float32Array.from([0, 1, 26, 65535, -0]), true)).toBe(true);
    for (const bad of [0.5, -1, NaN, Infinity, -Infinity]) {
      const x = Float32Array.from([1, 2, bad, 3]);
      expect(allValid(x, true), String(bad)).toBe(false);
      expect(exact(x, true)).toBe(false);
    }
  });
});
