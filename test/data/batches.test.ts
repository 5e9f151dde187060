import { describe, expect, it } from 'vitest';
import { batchCount, batches } from '../../src/data/batches.ts';
import { countedTargets, makeImageDataset, selectExamples } from '../../src/data/dataset.ts';
import { wordsDataset } from '../../src/data/words.ts';
import { DistributedSampler } from '../../src/data/sampler.ts';
import { isRingtrainError } from '../../src/core/errors.ts';

/** 23 tiny 2×2 images whose pixels encode their index, so a batch tells us which examples it holds. */
function tinyDataset(n = 23) {
  const images = new Float32Array(n * 4);
  const labels = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    images.fill(i / 100, i * 4, i * 4 + 4);
    labels[i] = i % 10;
  }
  return makeImageDataset({ images, labels, height: 2, width: 2, classes: 10 });
}

describe('batches', () => {
  it('covers every example once per epoch, in a seeded order, with matching pixels and labels', () => {
    const d = tinyDataset();
    const list = [...batches(d, { batchSize: 5, seed: 1, epoch: 0, dropLast: false })];
    expect(list.map((b) => b.size)).toEqual([5, 5, 5, 5, 3]);
    const seen = list.flatMap((b) => [...b.indices]);
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: 23 }, (_, i) => i));
    expect(seen).not.toEqual(Array.from({ length: 23 }, (_, i) => i));
    for (const b of list) {
      for (let k = 0; k < b.size; k++) {
        expect(b.x[k * 4]).toBeCloseTo(b.indices[k] / 100, 6);
        expect(b.labels[k]).toBe(b.indices[k] % 10);
      }
    }
    const again = [...batches(d, { batchSize: 5, seed: 1, epoch: 0, dropLast: false })].flatMap((b) => [...b.indices]);
    expect(again).toEqual(seen);
    const nextEpoch = [...batches(d, { batchSize: 5, seed: 1, epoch: 1, dropLast: false })].flatMap((b) => [
      ...b.indices,
    ]);
    expect(nextEpoch).not.toEqual(seen);
  });

  it('resumes mid-epoch at the same place in the same order', () => {
    const d = tinyDataset();
    const all = [...batches(d, { batchSize: 4, seed: 2, epoch: 3 })].map((b) => [...b.indices]);
    const rest = [...batches(d, { batchSize: 4, seed: 2, epoch: 3, startBatch: 2 })].map((b) => [...b.indices]);
    expect(rest).toEqual(all.slice(2));
  });

  it('drops the short last batch by default', () => {
    const d = tinyDataset();
    expect([...batches(d, { batchSize: 5 })].map((b) => b.size)).toEqual([5, 5, 5, 5]);
    expect(batchCount(23, 5)).toBe(4);
    expect(batchCount(23, 5, false)).toBe(5);
  });

  it('rejects a bad batch size and bad example indices', () => {
    const d = tinyDataset();
    for (const batchSize of [0, -3, 2.5]) {
      let err: unknown;
      try {
        batches(d, { batchSize }).next();
      } catch (e) {
        err = e;
      }
      expect(isRingtrainError(err, 'ERR_INVALID_ARGUMENT')).toBe(true);
    }
    expect(() => selectExamples(d, [0, 23])).toThrow(/outside 0\.\.22/);
  });

  it('rejects datasets whose arrays disagree', () => {
    expect(() =>
      makeImageDataset({ images: new Float32Array(12), labels: new Uint8Array(4), height: 2, width: 2, classes: 10 }),
    ).toThrow(/do not match/);
    expect(() =>
      makeImageDataset({ images: new Float32Array(4), labels: new Uint8Array([12]), height: 2, width: 2, classes: 10 }),
    ).toThrow(/label 12/);
  });
});

describe('DistributedSampler', () => {
  it('gives every rank an equal shard, together covering every example, reshuffled each epoch', () => {
    for (const size of [1, 2, 3, 4, 7]) {
      const shards = Array.from({ length: size }, (_, rank) =>
        new DistributedSampler(23, { rank, size, seed: 9 }).indices(0),
      );
      const len = Math.ceil(23 / size);
      for (const s of shards) expect(s.length).toBe(len);
      const union = new Set(shards.flatMap((s) => [...s]));
      expect(union.size).toBe(23);
      const e1 = new DistributedSampler(23, { rank: 0, size, seed: 9 }).indices(1);
      if (len > 2) expect([...e1]).not.toEqual([...shards[0]]);
    }
  });

  it('step t of N ranks at batch B covers the same examples as step t of one rank at batch N·B', () => {
    const d = tinyDataset(40);
    const size = 4,
      B = 3;
    const big = [
      ...batches(d, {
        batchSize: size * B,
        indices: new DistributedSampler(40, { rank: 0, size: 1, seed: 3 }).indices(2),
      }),
    ];
    const small = Array.from({ length: size }, (_, rank) => [
      ...batches(d, { batchSize: B, indices: new DistributedSampler(40, { rank, size, seed: 3 }).indices(2) }),
    ]);
    expect(small[0].length).toBe(big.length);
    for (let t = 0; t < big.length; t++) {
      const union = small.flatMap((r) => [...r[t].indices]).sort((a, b) => a - b);
      expect(union).toEqual([...big[t].indices].sort((a, b) => a - b));
    }
  });

  it('rejects a rank outside the job', () => {
    expect(() => new DistributedSampler(10, { rank: 2, size: 2 })).toThrow(/rank 2 is outside 0\.\.1/);
    expect(() => new DistributedSampler(10, { rank: 0, size: 0 })).toThrow(/size must be a positive integer/);
  });
});

describe('batches drawn with replacement, shared over ranks', () => {
  // Words of different lengths: each rank's share of a step's counted targets differs.
  const words = wordsDataset(['a', 'bb', 'ccc', 'dddd', 'eeeee', 'ffffff', 'ggggggg', 'hhhhhhhh'], 10);
  it('give each rank its share of the step’s counted targets, summing to one over the ranks', () => {
    const size = 2;
    const perRank = [0, 1].map((rank) => [
      ...batches(words, { batchSize: 2, replacement: true, seed: 3, share: { rank, size } }),
    ]);
    const whole = [...batches(words, { batchSize: 4, replacement: true, seed: 3 })];
    expect(perRank[0].length).toBe(whole.length);
    let uneven = 0;
    whole.forEach((w, t) => {
      const [a, b] = [perRank[0][t], perRank[1][t]];
      expect(a.targetShare! + b.targetShare!).toBeCloseTo(1, 12);
      expect(a.targetShare).toBeCloseTo(countedTargets(a.labels) / countedTargets(w.labels), 12);
      // The ranks' examples together are the one peer's draw.
      expect([...a.indices, ...b.indices].sort()).toEqual([...w.indices].sort());
      if (Math.abs(a.targetShare! - 0.5) > 1e-9) uneven++;
    });
    expect(uneven).toBeGreaterThan(0);
    expect(whole[0].targetShare).toBeUndefined();
  });
});
