/**
 * Dynamic loss scaling (src/engine/loss-scale.ts) on a real adapter (Node: SwiftShader): the
 * seed and unscale kernels, an overflow that skips the step and halves S, and S growing back
 * after its clean steps. And where the adapter lacks 'shader-f16' (SwiftShader), --precision
 * f16-mixed is refused by the model and by the kernels; a ring's job config gives every peer its precision. The f16-mixed
 * training itself runs under Deno's lavapipe: test/deno/f16-mixed.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { createModel } from '../../src/engine/index.ts';
import { LossScaler } from '../../src/engine/loss-scale.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';

describe('LossScaler', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  /** One "step": the gradients written, the unscale recorded, the flag read. */
  async function step(scaler: LossScaler, grads: GPUBuffer, values: Float32Array): Promise<boolean> {
    scaler.beginStep();
    gpu.write(grads, values);
    gpu.record(scaler.planUnscale(grads, values.length));
    return scaler.endStep();
  }

  it('seeds by S and unscales by 1/S; an inf or NaN gradient skips the step and halves S, clean steps double it back', async () => {
    const scaler = new LossScaler(gpu, { initialScale: 1024, growthInterval: 3 });
    const n = 1000;
    const grads = gpu.storage(n, 'grads');
    const dy = gpu.upload(Float32Array.from({ length: n }, (_, i) => i / n - 0.5));
    try {
      scaler.beginStep();
      gpu.record(scaler.planSeed(dy, n));
      const seeded = await gpu.readF32(dy, 0, n);
      expect(seeded[0]).toBe(-0.5 * 1024);
      expect(seeded[750]).toBe(0.25 * 1024);

      const finite = Float32Array.from({ length: n }, (_, i) => (i - 500) * 2);
      expect(await step(scaler, grads, finite)).toBe(true);
      const unscaled = await gpu.readF32(grads, 0, n);
      expect(unscaled[0]).toBe(-1000 / 1024);
      expect(unscaled[999]).toBe(998 / 1024);

      for (const bad of [Infinity, NaN, -Infinity]) {
        const values = finite.slice();
        values[n - 1] = bad;
        const before = scaler.scale;
        expect(await step(scaler, grads, values), String(bad)).toBe(false);
        expect(scaler.scale).toBe(before / 2);
      }
      expect(scaler.skipped).toBe(3);
      expect(scaler.scale).toBe(128);
      // growthInterval clean steps in a row: S doubles, on the third and the sixth.
      const scales: number[] = [];
      for (let i = 0; i < 6; i++) {
        expect(await step(scaler, grads, finite)).toBe(true);
        scales.push(scaler.scale);
      }
      expect(scales).toEqual([128, 128, 256, 256, 256, 512]);
      expect(scaler.skipped).toBe(3);
    } finally {
      scaler.destroy();
      grads.destroy();
      dy.destroy();
    }
  });

  it('refuses a scale or growth interval out of range', () => {
    for (const options of [{ initialScale: 0 }, { initialScale: NaN }, { growthInterval: 0 }, { growthInterval: 1.5 }])
      expect(() => new LossScaler(gpu, options), JSON.stringify(options)).toThrow(/initialScale|growthInterval/);
  });

  it("f16-mixed on an adapter without 'shader-f16' is refused by the model, naming the feature and what to do", () => {
    if (gpu.hasShaderF16) return; // an adapter with it trains instead (the Deno test)
    const model = createModel(gpu, 'mlp', { hidden: [8], seed: 1 });
    try {
      let caught: unknown;
      try {
        model.useMixedPrecision!();
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(RingtrainError);
      expect((caught as RingtrainError).code).toBe(ErrorCode.InvalidArgument);
      expect((caught as RingtrainError).message).toMatch(/shader-f16.*--precision f32/);
      expect(model.lossScaler).toBeUndefined();
    } finally {
      model.destroy();
    }
  });
});

describe('a ring job at f16-mixed', () => {
  it("gives every peer the job's precision", () => {
    const job = {
      model: 'mlp',
      optimizer: 'sgd',
      batchPerPeer: 32,
      hyperparameters: { lr: 0.05, precision: 'f16-mixed' },
    };
    expect(trainConfigFromJob(job as never).precision).toBe('f16-mixed');
    const f32 = { ...job, hyperparameters: { lr: 0.05, precision: 'f32' } };
    expect(trainConfigFromJob(f32 as never).precision).toBe('f32');
  });
});
