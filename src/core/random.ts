/**
 * The project's one seeded generator. Every rank and every runtime must draw
 * the same numbers from the same seed (data order, initial weights, test
 * inputs), so nothing uses Math.random.
 */

/** A generator of floats in [0, 1). */
export type Random = () => number;

/** mulberry32: 32-bit state, integer-only arithmetic, uniform in [0, 1). */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
