/**
 * checkResumeFits asks the real model and optimizer (on a WebGPU adapter)
 * whether a checkpoint fits, as a worker does before it joins a ring: a
 * checkpoint saved from the same model passes; another size, another
 * optimizer or missing optimizer state is refused by name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import {
  checkpointFromFlat,
  decodeCheckpoint,
  encodeCheckpoint,
  type TrainingCheckpoint,
} from '../../src/checkpoint/checkpoint.ts';
import { type Dataset, makeImageDataset } from '../../src/data/dataset.ts';
import { checkResumeFits } from '../../src/distributed/train/resume-check.ts';
import { modelSpecFor, type LocalTrainConfig } from '../../src/distributed/train/train-local.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

// 8×8 images: a small MLP (64 → 128 → 4), enough to tell layouts apart.
const data = makeImageDataset({
  images: new Float32Array(2 * 64),
  labels: new Uint8Array(2),
  height: 8,
  width: 8,
  classes: 4,
});
const sgd: LocalTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  batch: 2,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 1,
};

async function refusal(p: Promise<unknown>): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isRingtrainError(err, 'ERR_BAD_CHECKPOINT'), String(err)).toBe(true);
  return err as Error;
}

describe('checkResumeFits (real model and optimizer)', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  /** A checkpoint exactly as training would save it, from a model built with `config` on `d`. */
  async function savedBy(config: LocalTrainConfig, d: Dataset): Promise<TrainingCheckpoint> {
    const model = createModel(gpu, modelSpecFor(config, d));
    const optimizer = createOptimizer(model, {
      kind: config.optimizer,
      lr: config.lr,
      momentum: config.momentum,
      weightDecay: config.weightDecay,
    });
    try {
      const c = checkpointFromFlat({
        model: config.model,
        optimizer: config.optimizer,
        step: 9,
        layout: model.layout,
        params: await model.readParams(),
        optimizerState: await optimizer.exportState(),
      });
      return decodeCheckpoint(encodeCheckpoint(c), 'saved.safetensors');
    } finally {
      optimizer.destroy();
      model.destroy();
    }
  }

  it('passes a checkpoint saved from the same model and optimizer', async () => {
    for (const config of [sgd, { ...sgd, optimizer: 'adamw' as const }]) {
      await expect(
        checkResumeFits(gpu, config, data, await savedBy(config, data), 'saved.safetensors'),
      ).resolves.toBeUndefined();
    }
  });

  it('refuses a checkpoint of another input size, naming the tensor and both shapes', async () => {
    const other = await savedBy(
      sgd,
      makeImageDataset({
        images: new Float32Array(2 * 16),
        labels: new Uint8Array(2),
        height: 4,
        width: 4,
        classes: 4,
      }),
    );
    const err = await refusal(checkResumeFits(gpu, sgd, data, other, 'small.safetensors'));
    expect(err.message).toMatch(
      /small\.safetensors: tensor 'dense0\.weight' has shape \[128,16\] in the checkpoint but \[128,64\] in the model/,
    );
  });

  it('refuses another optimizer, and optimizer state that is missing or of another length', async () => {
    const adamw = await savedBy({ ...sgd, optimizer: 'adamw' }, data);
    expect((await refusal(checkResumeFits(gpu, sgd, data, adamw, 'a.safetensors'))).message).toMatch(
      /a\.safetensors was saved with the adamw optimizer, not sgd/,
    );
    const good = await savedBy(sgd, data);
    const { velocity: _dropped, ...withoutVelocity } = good.optimizerState;
    expect(
      (await refusal(checkResumeFits(gpu, sgd, data, { ...good, optimizerState: withoutVelocity }, 'b.safetensors')))
        .message,
    ).toMatch(/b\.safetensors has no optimizer state 'velocity' \(sgd\)/);
    const short = { ...good.optimizerState, velocity: good.optimizerState.velocity.subarray(1) };
    expect(
      (await refusal(checkResumeFits(gpu, sgd, data, { ...good, optimizerState: short }, 'c.safetensors'))).message,
    ).toMatch(/optimizer state 'velocity' has shape \[\d+\] in the checkpoint but \[\d+\] in the optimizer/);
  });
});
