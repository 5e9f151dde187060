import { describe, expect, it } from 'vitest';
import { batches } from '../../src/data/batches.ts';
import { makeDataset } from '../../src/data/dataset.ts';
import {
  equalShares,
  EpochOrders,
  epochDone,
  globalIndices,
  rankBatch,
  shareOffset,
  stepsPerEpoch,
} from '../../src/data/global-batch.ts';
import { wordsDataset } from '../../src/data/words.ts';

/** n examples whose single input is their own index (so a batch says which examples it holds). */
function indexed(n: number) {
  return makeDataset({
    inputs: Float32Array.from({ length: n }, (_, i) => i),
    inputSize: 1,
    labels: Array.from({ length: n }, (_, i) => i % 3),
    positions: 1,
    classes: 3,
  });
}

describe('equal shares of a global batch', () => {
  it('differ by at most one, the first ranks taking the remainder, and sum to G', () => {
    expect(equalShares(10, 3)).toEqual([4, 3, 3]);
    expect(equalShares(96, 4)).toEqual([24, 24, 24, 24]);
    expect(equalShares(5, 5)).toEqual([1, 1, 1, 1, 1]);
    expect(shareOffset([4, 3, 3], 2)).toBe(7);
  });
  it('refuse a global batch that leaves a rank without an example, naming the fix', () => {
    expect(() => equalShares(2, 3)).toThrow(
      /global batch of 2 cannot give each of 3 peers an example; raise --global-batch/,
    );
  });
});

describe("a rank's part of the ring's step", () => {
  const d = indexed(50);
  it('together the ranks take the examples one peer at batch G takes, whatever the shares', () => {
    const single = [...batches(d, { batchSize: 12, seed: 5, epoch: 1 })];
    const orders = new EpochOrders();
    for (const shares of [[12], [6, 6], [4, 4, 4], [1, 7, 4], [3, 2, 2, 5]]) {
      for (let t = 0; t < stepsPerEpoch(d.count, 12); t++) {
        const parts = shares.map((_, rank) =>
          rankBatch(d, { global: 12, shares, rank, seed: 5, epoch: 1, epochExamples: t * 12 }, orders),
        );
        // Contiguous slices, in rank order, of the single peer's batch t.
        expect(parts.flatMap((p) => [...p.indices])).toEqual([...single[t].indices]);
        expect(parts.map((p) => p.size)).toEqual(shares);
        expect(parts.reduce((a, p) => a + p.targetShare, 0)).toBeCloseTo(1, 12);
        expect(parts.every((p) => p.ringTargets === 12)).toBe(true);
      }
    }
  });
  it('keeps the epoch position when the ring changes size mid-epoch at a fixed G', () => {
    // Three ranks for two steps, then two: the same examples as one peer all along.
    const seen: number[] = [];
    for (let t = 0; t < 4; t++) {
      const shares = t < 2 ? equalShares(12, 3) : equalShares(12, 2);
      for (let r = 0; r < shares.length; r++)
        seen.push(...rankBatch(d, { global: 12, shares, rank: r, seed: 5, epoch: 0, epochExamples: t * 12 }).indices);
    }
    expect(seen).toEqual([...batches(d, { batchSize: 12, seed: 5 })].flatMap((b) => [...b.indices]));
    expect(epochDone(50, { global: 12, epochExamples: 48 })).toBe(true);
    expect(epochDone(50, { global: 12, epochExamples: 36 })).toBe(false);
  });
  it('weighs words by their share of the step’s counted characters, summing to one', () => {
    const words = wordsDataset(['a', 'bb', 'ccc', 'dddd', 'eeeee', 'ffffff', 'ggggggg', 'hhhhhhhh'], 10);
    const step = { global: 6, seed: 3, epoch: 0, epochExamples: 0, replacement: true };
    const single = [...batches(words, { batchSize: 6, replacement: true, seed: 3 })][0];
    const parts = [0, 1].map((rank) => rankBatch(words, { ...step, shares: [2, 4], rank }));
    expect([...parts[0].indices, ...parts[1].indices]).toEqual([...single.indices]);
    expect(parts[0].targetShare + parts[1].targetShare).toBeCloseTo(1, 12);
    expect(globalIndices(words, step)).toEqual(single.indices);
  });
  it('refuses shares that do not add up to G, or a rank without one', () => {
    expect(() => rankBatch(d, { global: 12, shares: [6, 5], rank: 0, seed: 1, epoch: 0, epochExamples: 0 })).toThrow(
      /must be whole numbers >= 1 summing to the global batch 12/,
    );
    expect(() => rankBatch(d, { global: 12, shares: [12, 0], rank: 0, seed: 1, epoch: 0, epochExamples: 0 })).toThrow(
      /summing to the global batch/,
    );
    expect(() => rankBatch(d, { global: 12, shares: [6, 6], rank: 2, seed: 1, epoch: 0, epochExamples: 0 })).toThrow(
      /rank 2 is outside 0\.\.1/,
    );
  });
});
