/**
 * A model whose embedding, head and flat buffers pass one binding trains on
 * the sliced kernels as it does unsliced: the same transformer, seed and
 * batches on a Gpu limited to 64 KiB per binding and on one with the
 * adapter's limit. The sliced matmuls run another kernel than the unsliced
 * ones (the tiled one, with strides), so losses agree to rounding, not bits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

const LIMIT = 64 * 1024;
const spec = { kind: 'transformer' as const, seed: 5, vocab: 600, context: 8, layers: 1, width: 32, heads: 2 };

async function train(gpu: Gpu): Promise<{ losses: number[]; dispatches: number; params: Float32Array }> {
  const model = createModel(gpu, spec);
  // SGD: parameters move with the gradients, so rounding stays rounding (AdamW's m/√v amplifies a near-zero gradient's).
  const optimizer = createOptimizer(model, { kind: 'sgd', lr: 0.1 });
  const u = seededUniform(9);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(u() * spec.vocab));
  const losses: number[] = [];
  const capture = gpu.capture();
  for (let s = 0; s < 3; s++) {
    losses.push(await model.forwardBackward(Float32Array.from(ids(2 * spec.context)), ids(2 * spec.context), 2));
    optimizer.step();
  }
  capture.stop();
  const params = await model.readParams();
  optimizer.destroy();
  model.destroy();
  return { losses, dispatches: capture.dispatches.length, params };
}

describe('a model bigger than one binding', () => {
  let whole: Gpu;
  let sliced: Gpu;
  beforeAll(async () => {
    [whole, sliced] = [await acquireGpu(), await acquireGpu({ maxBindingBytes: LIMIT })];
  });
  afterAll(() => {
    whole?.destroy();
    sliced?.destroy();
  });

  it('trains on the sliced kernels as it does unsliced', { timeout: 120_000 }, async () => {
    const a = await train(whole);
    const b = await train(sliced);
    expect(b.dispatches, 'the limit did not slice anything').toBeGreaterThan(a.dispatches);
    expect(a.params.length * 4, 'the flat parameters fit one binding of the sliced Gpu').toBeGreaterThan(LIMIT);
    for (let i = 0; i < a.losses.length; i++)
      expect(
        Math.abs(b.losses[i] - a.losses[i]) / a.losses[i],
        `loss ${i}: ${b.losses[i]} sliced, ${a.losses[i]} whole`,
      ).toBeLessThan(1e-5);
    let worst = 0;
    for (let i = 0; i < a.params.length; i++) worst = Math.max(worst, Math.abs(b.params[i] - a.params[i]));
    expect(worst, 'parameters after 3 steps').toBeLessThan(1e-5);
  });
});
