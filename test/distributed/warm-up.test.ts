/**
 * The warm-up makes the model a peer will train, and its optimizer, with
 * every pipeline a step and an evaluation use built off the event loop
 * (Gpu.compileAhead), and holds exactly the memory of that one model: what
 * an attempt that hit a missing pipeline made is destroyed, and no throwaway
 * copy of the model is ever built. Afterwards a step and an evaluation build
 * no pipeline and create no buffer.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { wordsDataset } from '../../src/data/words.ts';
import { prepareTraining } from '../../src/distributed/train/warm-up.ts';
import type { LocalTrainConfig } from '../../src/distributed/train/train-local.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { modelSpecFor } from '../../src/distributed/train/model-fit.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const train = wordsDataset([
  'ring',
  'train',
  'gradient',
  'peer',
  'tensor',
  'kernel',
  'shader',
  'adapter',
  'buffer',
  'worker',
]);
const test = wordsDataset(['model', 'step', 'loss']);
const config: LocalTrainConfig = {
  model: 'transformer',
  optimizer: 'adamw',
  epochs: 1,
  batch: 4,
  lr: 0.01,
  momentum: 0,
  weightDecay: 0,
  seed: 2,
  modelOptions: { layers: 1, width: 16, heads: 2 },
};

let fresh: Gpu | undefined;
afterAll(() => fresh?.destroy());
/** A Gpu of its own: no pipeline built yet. */
async function freshGpu(): Promise<Gpu> {
  fresh = await acquireGpu();
  return fresh;
}

/** Counts the device's pipeline builds, synchronous and not. */
function countBuilds(gpu: Gpu): { sync: number; async: number } {
  const device = gpu.device;
  const counts = { sync: 0, async: 0 };
  const sync = device.createComputePipeline.bind(device);
  const later = device.createComputePipelineAsync.bind(device);
  device.createComputePipeline = (d) => (counts.sync++, sync(d));
  device.createComputePipelineAsync = (d) => (counts.async++, later(d));
  return counts;
}

describe('warm-up', () => {
  it(
    'builds every pipeline of a step and an evaluation off the event loop, for the one real model',
    { timeout: 400_000 },
    async () => {
      const gpu = await freshGpu();
      const builds = countBuilds(gpu);
      const before = gpu.pool.heldBytes;
      const { model, optimizer } = await prepareTraining(gpu, config, train, test);
      expect(builds.sync).toBe(0);
      expect(builds.async).toBeGreaterThan(5);
      expect(gpu.pipelineCount).toBe(builds.async);
      const warmed = gpu.pool.heldBytes - before;

      // The same model and optimizer made again, plainly (the pipelines are there now), take as many
      // GPU bytes as the warm-up holds: nothing of an abandoned attempt is left, no throwaway copy.
      const held = gpu.pool.heldBytes;
      const m = createModel(gpu, modelSpecFor(config, train));
      const o = createOptimizer(m, { kind: 'adamw', lr: 0.01, momentum: 0, weightDecay: 0 });
      for (const makePlan of m.plansFor!(4, test.count)) makePlan();
      expect(gpu.pool.heldBytes - held).toBe(warmed);
      expect(builds.sync).toBe(0);
      o.destroy();
      m.destroy();

      // A training step and an evaluation find everything made (the first read makes the pool's staging buffer: read
      // once before counting).
      await gpu.readF32(model.params, 0, 1);
      const pipelines = gpu.pipelineCount;
      const allocations = gpu.allocations;
      const batch = { x: train.inputs.slice(0, 4 * train.inputSize), y: train.labels.slice(0, 4 * train.positions) };
      const loss = await model.forwardBackward(batch.x, batch.y, 4);
      optimizer.step();
      const e = await model.evaluate(test.inputs, test.labels);
      expect(Number.isFinite(loss) && Number.isFinite(e.loss)).toBe(true);
      expect([gpu.pipelineCount, gpu.allocations]).toEqual([pipelines, allocations]);
      expect(builds.sync).toBe(0);
      optimizer.destroy();
      model.destroy();
    },
  );
});
