/**
 * The warm-up of a micro-batched peer (warm-up.ts with `microBatch`): it plans the pass at the
 * micro-batch and the adds of a step's passes, building every pipeline off the event loop and
 * keeping nothing an abandoned attempt made; afterwards a step and an evaluation build no
 * pipeline and create no buffer.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import type { LocalTrainConfig } from '../../src/distributed/train/config-types.ts';
import { modelSpecFor } from '../../src/distributed/train/model-fit.ts';
import { prepareTraining } from '../../src/distributed/train/warm-up.ts';
import { createModel, createOptimizer, useMicroBatch } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const config: LocalTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  batch: 8,
  microBatch: 2,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 3,
};

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

let gpu: Gpu | undefined;
afterAll(() => gpu?.destroy());

describe('warm-up with a micro-batch', () => {
  it('plans the pass and its adds ahead, holding what a plain build holds; a step then makes nothing', async () => {
    // A Gpu of its own: no pipeline built yet, so the warm-up meets every one missing.
    gpu = await acquireGpu();
    const device = gpu.device;
    let syncBuilds = 0;
    const sync = device.createComputePipeline.bind(device);
    device.createComputePipeline = (d) => (syncBuilds++, sync(d));
    const { train, test } = await digits(32);
    const before = gpu.pool.heldBytes;
    const { model, optimizer } = await prepareTraining(gpu, config, train, test);
    const warmed = gpu.pool.heldBytes - before;
    expect(syncBuilds).toBe(0);

    // The same model made plainly (the pipelines are there now) holds as many bytes: nothing abandoned is left.
    const held = gpu.pool.heldBytes;
    const plain = createModel(gpu, modelSpecFor(config, train));
    const plainOptimizer = createOptimizer(plain, { kind: 'sgd', lr: 0.05, momentum: 0.9, weightDecay: 0 });
    useMicroBatch(plain, 2, 8);
    for (const makePlan of plain.plansFor!(8, test.count)) makePlan();
    expect(gpu.pool.heldBytes - held).toBe(warmed);
    plainOptimizer.destroy();
    plain.destroy();

    await gpu.readF32(model.params, 0, 1); // the pool's staging buffer, made by the first read
    const [pipelines, allocations] = [gpu.pipelineCount, gpu.allocations];
    const x = train.inputs.slice(0, 8 * train.inputSize);
    const loss = await model.forwardBackward(x, train.labels.slice(0, 8), 8);
    optimizer.step();
    const e = await model.evaluate(test.inputs, test.labels);
    expect(Number.isFinite(loss) && Number.isFinite(e.loss)).toBe(true);
    expect([gpu.pipelineCount, gpu.allocations]).toEqual([pipelines, allocations]);
    expect(syncBuilds).toBe(0);
    optimizer.destroy();
    model.destroy();
  }, 240_000);
});
