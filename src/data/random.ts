/**
 * Seeded randomness for data order. Every rank must draw the same permutation
 * from the same seed in every runtime, so we use our own small generator
 * (mulberry32: 32-bit state, integer-only arithmetic) instead of Math.random.
 */

import { mulberry32, type Random } from '../core/random.ts';

export { mulberry32, type Random } from '../core/random.ts';

/**
 * Mixes several integers (seed, epoch, …) into one 32-bit seed, so that
 * seed+epoch streams do not overlap the way plain addition would
 * (seed 1 epoch 2 and seed 2 epoch 1 must differ).
 */
export function mixSeed(...parts: number[]): number {
  let h = 0x811c9dc5;
  for (const p of parts) {
    h = Math.imul(h ^ (p >>> 0), 0x01000193);
    h ^= h >>> 13;
    h = Math.imul(h, 0x5bd1e995);
    h ^= h >>> 15;
  }
  return h >>> 0;
}

/** Shuffles `items` in place (Fisher–Yates) and returns it. */
export function shuffleInPlace<T extends { length: number; [i: number]: unknown }>(items: T, random: Random): T {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const tmp = items[i];
    items[i] = items[j];
    items[j] = tmp;
  }
  return items;
}

/** A seeded permutation of 0..n-1. */
export function permutation(n: number, seed: number): Uint32Array {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  return shuffleInPlace(order, mulberry32(seed));
}
