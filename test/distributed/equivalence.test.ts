/**
 * Data-parallel equivalence: with plain SGD, N ranks at batch B each take the
 * same steps as one rank at batch N·B over the same examples, because the
 * loss is a mean and the ring averages the per-rank gradients. The ranks run
 * the real trainer and the real ring-allreduce over memory links, each with
 * its own model on the real WebGPU adapter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { makeDataset, type Dataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { trainDistributed, type DistributedTrainConfig } from '../../src/distributed/trainer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const STEPS = 30;
const PER_RANK_BATCH = 8;

let gpu: Gpu;
let train: Dataset;
let test: Dataset;

beforeAll(async () => {
  gpu = await acquireGpu();
  const mnist = await loadMnist();
  // 960 examples divide evenly by 1, 2 and 4 ranks and by the batches used below.
  const n = 960;
  const px = 784;
  train = makeDataset({ images: mnist.train.images.slice(0, n * px), labels: mnist.train.labels.slice(0, n), height: 28, width: 28, classes: 10 });
  test = makeDataset({ images: mnist.test.images.slice(0, 200 * px), labels: mnist.test.labels.slice(0, 200), height: 28, width: 28, classes: 10 });
});
afterAll(() => gpu?.destroy());

function config(batch: number): DistributedTrainConfig {
  return { model: 'mlp', optimizer: 'sgd', epochs: 1, batch, lr: 0.1, momentum: 0, weightDecay: 0, seed: 7, steps: STEPS };
}

/** Trains `size` ranks in this process and returns rank 0's final checkpoint (the weights). */
async function trainRing(size: number, batch: number): Promise<{ params: Float32Array; accuracies: number[] }> {
  const comms = createMemoryRing(size);
  let final: TrainingCheckpoint | undefined;
  const results = await Promise.all(
    comms.map((comm) =>
      trainDistributed({ gpu, comm, train, test, config: config(batch), onCheckpoint: (c) => void (final = c) }),
    ),
  );
  comms.forEach((c) => c.close());
  expect(final, 'rank 0 wrote a checkpoint at the end').toBeDefined();
  expect(results.map((r) => r.steps)).toEqual(Array(size).fill(STEPS));
  const flat = Object.values(final!.params).flatMap((t) => Array.from(t.data));
  return { params: Float32Array.from(flat), accuracies: results.map((r) => r.testAccuracy) };
}

function maxRelativeDifference(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    // Relative to the weight's own size, floored so weights near zero compare absolutely.
    worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-2));
  }
  return worst;
}

describe('data-parallel equivalence (plain SGD, real kernels, real ring-allreduce)', () => {
  for (const n of [2, 4]) {
    it(`${n} ranks at batch ${PER_RANK_BATCH} reach the weights of one rank at batch ${n * PER_RANK_BATCH} after ${STEPS} steps`, async () => {
      const single = await trainRing(1, n * PER_RANK_BATCH);
      const ring = await trainRing(n, PER_RANK_BATCH);
      const initial = await trainRingInitial();
      // The weights moved (the test would pass vacuously on a model that never trains).
      expect(maxRelativeDifference(single.params, initial)).toBeGreaterThan(0.05);
      expect(maxRelativeDifference(ring.params, single.params)).toBeLessThanOrEqual(1e-3);
      // Evaluation is averaged over ranks, so every rank reports the same accuracy.
      expect(new Set(ring.accuracies).size).toBe(1);
    });
  }
});

/** The weights before any step: the same seed, zero steps' worth of training (one step at lr→0 is not needed: checkpoint at step 0). */
async function trainRingInitial(): Promise<Float32Array> {
  const [comm] = createMemoryRing(1);
  let first: TrainingCheckpoint | undefined;
  await trainDistributed({ gpu, comm, train, test, config: { ...config(8), steps: 1, lr: 1e-12 }, onCheckpoint: (c) => void (first ??= c) });
  comm.close();
  return Float32Array.from(Object.values(first!.params).flatMap((t) => Array.from(t.data)));
}
