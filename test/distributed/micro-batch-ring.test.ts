/**
 * Micro-batches in a ring (trainDistributed's `microBatch`, as `run --micro-batch` gives every
 * worker): each rank splits its step into passes that add up on the GPU and still reads back and
 * reduces its gradient once per step, bucket by bucket as the last pass's backward finishes them,
 * ending at the weights of the unsplit ring (to f32 rounding: the sums run in another order).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { trainDistributed, type DistributedTrainConfig } from '../../src/distributed/train/trainer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

async function digits(count: number) {
  const m = await loadMnist();
  const part = (images: Float32Array, labels: ArrayLike<number>) =>
    makeImageDataset({
      images: images.slice(0, count * 784),
      labels: Array.from(labels).slice(0, count),
      height: 28,
      width: 28,
      classes: 10,
    });
  return { train: part(m.train.images, m.train.labels), test: part(m.test.images, m.test.labels) };
}

const job: DistributedTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  steps: 3,
  batch: 8,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 2,
  guard: { direction: false, doubt: false },
};

/** Two memory-linked ranks train `config`: rank 0's GPU waits for gradients, the command buffers submitted, the final weights. */
async function trainTwo(config: DistributedTrainConfig) {
  const { train, test } = await digits(64);
  const comms = createMemoryRing(2);
  const events: RingEvent[] = [];
  comms[0].events.on((e) => void (e.rank === 0 && events.push(e)));
  let final: TrainingCheckpoint | undefined;
  const submitted = gpu.submits;
  await Promise.all(
    comms.map((comm) => trainDistributed({ gpu, comm, train, test, config, onCheckpoint: (c) => void (final = c) })),
  );
  comms.forEach((c) => c.close());
  const waits = events.flatMap((e) => (e.type === 'gpu-wait' && e.what.startsWith('gradients') ? [e.what] : []));
  return {
    waits,
    submits: gpu.submits - submitted,
    params: Float32Array.from(Object.values(final!.params).flatMap((t) => Array.from(t.data))),
  };
}

describe('a ring of micro-batched ranks', () => {
  it('reads and reduces each step once, by bucket, and ends at the unsplit ring’s weights', async () => {
    const whole = await trainTwo(job);
    const split = await trainTwo({ ...job, microBatch: 2 });
    // Two buckets a step (the MLP's last layer, then its first), 3 steps: the same reads as unsplit.
    const perStep = ['gradients bucket 1/2', 'gradients bucket 2/2'];
    expect(whole.waits).toEqual([...perStep, ...perStep, ...perStep]);
    expect(split.waits).toEqual(whole.waits);
    // Each pass but the last is submitted before the next one's batch is uploaded: 3 more a step on each rank.
    expect(split.submits).toBeGreaterThanOrEqual(whole.submits + 3 * 3 * 2);
    let worst = 0;
    for (let i = 0; i < whole.params.length; i++) worst = Math.max(worst, Math.abs(split.params[i] - whole.params[i]));
    expect(worst).toBeLessThan(1e-6);
    // With the gradient read whole, one read a step as well.
    const off = await trainTwo({ ...job, microBatch: 4, overlap: false });
    expect(off.waits).toEqual(['gradients', 'gradients', 'gradients']);
  }, 120_000);
});
