/**
 * The built-in transformer on the autodiff core: the spec'd model's state-dict
 * names and 105,627 parameters; a small one's gradients (GPU = CPU executor =
 * finite differences) with padded, ignored targets; the loss counting only
 * real targets; a short training run with no GPU buffer made after warm-up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModel, createOptimizer, trainStep, Transformer } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { seededUniform } from '../../src/nn/random.ts';
import { checkModel } from '../nn/model-check.ts';

/** Words as the workload encodes them: input '\n'+word, target word+'\n', padded (targets −1). */
function encode(words: number[][], T: number): { x: Float32Array; y: number[] } {
  const x = new Float32Array(words.length * T);
  const y: number[] = Array(words.length * T).fill(-1);
  words.forEach((w, r) => {
    w.forEach((c, i) => {
      x[r * T + i + 1] = c;
      y[r * T + i] = c;
    });
    y[r * T + w.length] = 0;
  });
  return { x, y };
}

describe('transformer', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it("has the spec'd 105,627 parameters under the PyTorch reference's names", () => {
    const model = createModel(gpu, { kind: 'transformer' });
    expect(model.paramCount).toBe(105_627);
    const names = model.layout.map((e) => `${e.name}:${e.shape.join('x')}`);
    expect(names.slice(0, 14)).toEqual([
      'tok.weight:27x64',
      'pos.weight:32x64',
      'blocks.0.ln1.weight:64',
      'blocks.0.ln1.bias:64',
      'blocks.0.qkv.weight:192x64',
      'blocks.0.qkv.bias:192',
      'blocks.0.proj.weight:64x64',
      'blocks.0.proj.bias:64',
      'blocks.0.ln2.weight:64',
      'blocks.0.ln2.bias:64',
      'blocks.0.fc.weight:256x64',
      'blocks.0.fc.bias:256',
      'blocks.0.out.weight:64x256',
      'blocks.0.out.bias:64',
    ]);
    expect(names.slice(-4)).toEqual(['lnf.weight:64', 'lnf.bias:64', 'head.weight:27x64', 'head.bias:27']);
    model.destroy();
  });

  it('gradients: GPU = CPU executor = finite differences, padded targets ignored', async () => {
    const model = new Transformer(gpu, { vocab: 7, context: 6, width: 8, heads: 2, layers: 2, seed: 3 });
    const { x, y } = encode([[3, 1, 4], [5, 2, 6, 1, 1], [2]], 6);
    const c = await checkModel(model, x, y, 3);
    expect(Math.abs(c.loss - c.cpuLoss)).toBeLessThan(1e-5);
    expect(c.gradError).toBeLessThan(1e-5);
    expect(c.numeric, 'worst numeric/analytic mismatch over tolerance').toBeLessThanOrEqual(1);
    expect(c.gradMass).toBeGreaterThan(1e-2);
    // Evaluation averages over the 12 real targets only.
    const e = await model.evaluate(x, y, 2);
    expect(Math.abs(e.loss - c.cpuLoss)).toBeLessThan(1e-5);
    model.destroy();
  });

  it('learns to spell a few words, with no GPU buffer made after the first step', async () => {
    const model = new Transformer(gpu, { vocab: 7, context: 8, width: 16, heads: 2, layers: 1, seed: 1 });
    const opt = createOptimizer(model, { kind: 'adamw', lr: 0.01 });
    const u = seededUniform(4);
    const words = Array.from({ length: 16 }, () =>
      Array.from({ length: 2 + Math.floor(u() * 4) }, () => 1 + Math.floor(u() * 6)),
    );
    const { x, y } = encode(words, 8);
    const first = await trainStep(model, opt, x, y);
    const before = gpu.allocations;
    let last = first;
    for (let i = 0; i < 40; i++) last = await trainStep(model, opt, x, y);
    expect(gpu.allocations).toBe(before);
    expect(first).toBeGreaterThan(1.5);
    expect(last).toBeLessThan(first * 0.6);
    await expect(
      model.forwardBackward(
        x,
        y.map((v, i) => (i === 3 ? 7 : v)),
      ),
    ).rejects.toThrow(/target 3 is 7/);
    await expect(
      model.forwardBackward(
        x.map((v, i) => (i === 2 ? 0.5 : v)),
        y,
      ),
    ).rejects.toThrow(/integers ≥ 0/);
    model.destroy();
    opt.destroy();
  });
});
