/**
 * `train --dry-run`: the bytes it reports are the bytes the same model,
 * optimizer and step create on a real adapter (while the dry run itself
 * creates nothing there), and the size refusals name the layer, the buffer
 * and the change that helps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planDryRun } from '../../src/cli/commands/dry-run.ts';
import { textSplit } from '../../src/data/text-split.ts';
import { modelSpecFor } from '../../src/distributed/train/model-fit.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { GraphModel } from '../../src/engine/graph-model.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planningGpu } from '../../src/gpu/planning-device.ts';
import { ringtrain } from '../support/cli.ts';

const text = 'the quick brown fox jumps over the lazy dog; '.repeat(40);
const opts = {
  model: 'transformer',
  batch: 4,
  optimizer: 'adamw' as const,
  lr: 1e-3,
  momentum: 0.9,
  weightDecay: 0.01,
  seed: 1,
  epochs: 1,
  modelOptions: { layers: 2, width: 32, heads: 2 },
};

describe('train --dry-run', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('reports the bytes that training the same model creates, and creates none itself', () => {
    const { train } = textSplit(text, 16);
    const before = { buffers: gpu.allocations, bytes: gpu.pool.createdBytes };
    const r = planDryRun(gpu, modelSpecFor(opts, train), opts);
    expect(gpu.allocations, 'the dry run created buffers on the real device').toBe(before.buffers);

    const model = createModel(gpu, modelSpecFor(opts, train));
    const optimizer = createOptimizer(model, { kind: 'adamw' });
    (model as GraphModel).planTrainingStep(opts.batch);
    const p = r.planned_gpu_bytes_by_part;
    // Each Gpu makes one 16-byte placeholder buffer of its own when created; the dry run's counts it.
    expect(r.planned_gpu_bytes).toBe(gpu.pool.createdBytes - before.bytes + 16);
    expect(p.parameters_and_gradients + p.optimizer_state + p.training_step).toBe(r.planned_gpu_bytes);
    expect(r.params).toBe(model.paramCount);
    expect(p.optimizer_state).toBe(2 * model.flatLength * 4 + 32); // AdamW's two moments and its 7-field uniform
    expect(r.limits).toEqual({
      maxStorageBufferBindingSize: gpu.limits.maxStorageBufferBindingSize,
      maxBufferSize: gpu.limits.maxBufferSize,
    });
    optimizer.destroy();
    model.destroy();
  });

  it('with a micro-batch plans one pass at it, plus the flat gradient the passes add from, as training creates', () => {
    const { train } = textSplit(text, 16);
    const spec = modelSpecFor(opts, train);
    const split = planDryRun(gpu, spec, { ...opts, batch: 8, microBatch: 2 });
    const pass = planDryRun(gpu, spec, { ...opts, batch: 2 });
    expect(split.micro_batch).toBe(2);
    const model = createModel(gpu, spec) as GraphModel;
    const before = gpu.pool.createdBytes;
    model.setMicroBatch(2);
    model.planTrainingStep(8);
    expect(gpu.pool.createdBytes - before).toBe(split.planned_gpu_bytes_by_part.training_step);
    // The activations of 2 samples, not 8: the step at 8 in passes of 2 is the step at 2, the second
    // flat gradient and a few small buffers (the step's loss, its 4 weights, the adds' uniforms).
    const extra = split.planned_gpu_bytes_by_part.training_step - pass.planned_gpu_bytes_by_part.training_step;
    expect(extra).toBeGreaterThanOrEqual(model.flatLength * 4);
    expect(extra).toBeLessThan(model.flatLength * 4 + 1024);
    model.destroy();
  });

  it('refuses a parameter no kernel can split by its layer, name and shape, and says to make the layer smaller', () => {
    const planner = planningGpu(gpu, { maxBindingBytes: 4096 });
    const model = createModel(planner, {
      kind: 'mlp',
      inputSize: 64,
      hidden: [32],
      classes: 10,
      seed: 1,
    }) as GraphModel;
    expect(() => model.planTrainingStep(8)).toThrow(
      /^dense0 \(linear of \[8, 64\].*operand B \(8192 bytes\) cannot be sliced to fit one binding \(4096 bytes\).*parameter \S*weight \[32, 64\].*make the layer smaller/,
    );
  });

  it('refuses a binding limit that is not whole words or below the offset alignment, naming it', () => {
    for (const bad of [100, 1022, 1024.5])
      expect(() => planningGpu(gpu, { maxBindingBytes: bad })).toThrow(
        /maxBindingBytes must be a whole number of 4-byte words, at least minStorageBufferOffsetAlignment/,
      );
    expect(planningGpu(gpu, { maxBindingBytes: 2 ** 52 }).maxBindingBytes, 'clamped to the adapter').toBe(
      gpu.limits.maxStorageBufferBindingSize,
    );
  });

  it('refuses an activation past the limit and says to use a smaller batch or context', () => {
    const planner = planningGpu(gpu, { maxBindingBytes: 4096 });
    const model = createModel(planner, { kind: 'mlp', inputSize: 16, hidden: [8], classes: 10, seed: 1 }) as GraphModel;
    expect(() => model.planTrainingStep(128)).toThrow(
      /^dense1 \(linear of \[128, 8\].*would bind 5120 bytes of buffer 'dense1\/linear:grad'.*smaller --batch or --context$/,
    );
  });

  it('prints one JSON line from the command, without training', { timeout: 120_000 }, async () => {
    const r = await ringtrain([
      'train',
      '--text',
      '@brown',
      '--context',
      '16',
      '--layers',
      '1',
      '--width',
      '16',
      '--heads',
      '2',
      '--batch',
      '2',
      '--dry-run',
      '--json',
      '--runtime',
      'node',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const line = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(line).toMatchObject({ dry_run: true, model: 'transformer', batch: 2, context: 16, runtime: 'node' });
    expect(line.params).toBeGreaterThan(0);
    expect(line).not.toHaveProperty('steps');
  });
});
