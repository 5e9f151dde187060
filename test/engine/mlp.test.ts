/** The MLP on the flat buffers: layout, seeded init, no allocation after warm-up, training, and bad input. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { createModel, createOptimizer, PARAM_ALIGN, trainStep } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { MlpModule, resolveMlpSpec } from '../../src/engine/mlp.ts';
import { Graph } from '../../src/nn/tensor.ts';

/** A separable toy problem: the class is which quarter of the input holds the largest sum. */
function toyBatch(n: number, inputSize: number, seed: number): { x: Float32Array; y: Uint32Array } {
  const u = seededUniform(seed);
  const x = new Float32Array(n * inputSize);
  const y = new Uint32Array(n);
  const q = inputSize / 4;
  for (let i = 0; i < n; i++) {
    y[i] = Math.floor(u() * 4);
    for (let j = 0; j < inputSize; j++) x[i * inputSize + j] = u() * 0.5 + (Math.floor(j / q) === y[i] ? 0.5 : 0);
  }
  return { x, y };
}

const invalid = expect.objectContaining({ code: ErrorCode.InvalidArgument });

describe('mlp', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('lays tensors out in order, 256-byte aligned, with the default 784-128-10 shape', async () => {
    const model = createModel(gpu, { kind: 'mlp', seed: 3 });
    expect(model.layout.map((e) => [e.name, e.shape])).toEqual([
      ['dense0.weight', [128, 784]],
      ['dense0.bias', [128]],
      ['dense1.weight', [10, 128]],
      ['dense1.bias', [10]],
    ]);
    expect(model.paramCount).toBe(784 * 128 + 128 + 128 * 10 + 10);
    for (const e of model.layout) expect(e.offset % PARAM_ALIGN).toBe(0);
    expect(model.flatLength).toBeGreaterThanOrEqual(model.paramCount);
    const p = await model.readParams();
    expect(p.length).toBe(model.flatLength);
    const w = model.layout[0];
    const weights = p.subarray(w.offset, w.offset + w.length);
    // He init: std √(2/784) ≈ 0.0505.
    const std = Math.sqrt(weights.reduce((a, v) => a + v * v, 0) / weights.length);
    expect(std).toBeGreaterThan(0.045);
    expect(std).toBeLessThan(0.056);
    const b = model.layout[1];
    expect(p.subarray(b.offset, b.offset + b.length).every((v) => v === 0)).toBe(true);
    model.destroy();
  });

  it('gives identical parameters for the same seed and different ones for another', async () => {
    const [a, b, c] = [1, 1, 2].map((seed) =>
      createModel(gpu, { kind: 'mlp', seed, hidden: [16], inputSize: 8, classes: 3 }),
    );
    const [pa, pb, pc] = await Promise.all([a.readParams(), b.readParams(), c.readParams()]);
    expect(pa).toEqual(pb);
    expect(pa).not.toEqual(pc);
    for (const m of [a, b, c]) m.destroy();
  });

  it('round-trips params and grads through read/write', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [5], inputSize: 6, classes: 2 });
    const values = Float32Array.from({ length: model.flatLength }, (_, i) => i * 0.5);
    model.writeParams(values);
    expect(await model.readParams()).toEqual(values);
    model.writeGrads(values.map((v) => -v));
    expect(await model.readGrads()).toEqual(values.map((v) => -v));
    model.destroy();
  });

  it('allocates no GPU buffer in a training step after warm-up', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [32], inputSize: 64, classes: 4 });
    const opt = createOptimizer(model, { kind: 'adamw', lr: 0.01 });
    const { x, y } = toyBatch(16, 64, 9);
    await trainStep(model, opt, x, y);
    const before = gpu.allocations;
    for (let i = 0; i < 3; i++) await trainStep(model, opt, x, y);
    await model.evaluate(x, y, 16);
    expect(gpu.allocations).toBe(before);
    model.destroy();
    opt.destroy();
  });

  for (const kind of ['sgd', 'adamw'] as const) {
    it(`learns a separable toy problem with ${kind}`, async () => {
      const model = createModel(gpu, { kind: 'mlp', hidden: [32], inputSize: 32, classes: 4, seed: 4 });
      const opt = createOptimizer(model, { kind, lr: kind === 'sgd' ? 0.1 : 0.01 });
      const test = toyBatch(200, 32, 100);
      const before = await model.evaluate(test.x, test.y);
      const losses: number[] = [];
      for (let s = 0; s < 40; s++) {
        const { x, y } = toyBatch(32, 32, s + 1);
        losses.push(await trainStep(model, opt, x, y));
      }
      const after = await model.evaluate(test.x, test.y, 64);
      expect(opt.stepCount).toBe(40);
      expect(losses.slice(-5).reduce((a, b) => a + b) / 5).toBeLessThan(losses.slice(0, 5).reduce((a, b) => a + b) / 5);
      expect(after.loss).toBeLessThan(before.loss);
      expect(after.accuracy).toBeGreaterThan(0.9);
      const logits = await model.predict(test.x.subarray(0, 32 * 3));
      expect(logits.length).toBe(3 * 4);
      model.destroy();
      opt.destroy();
    });
  }

  it('rejects wrong shapes, bad labels and bad specs with InvalidArgument', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [4], inputSize: 6, classes: 3 });
    await expect(model.forwardBackward(new Float32Array(11), [0, 1])).rejects.toThrow(/x has 11 floats but batch 2/);
    await expect(model.forwardBackward(new Float32Array(12), [0, 3])).rejects.toThrow(
      /label 1 is 3; labels must be integers in \[0, 3\)/,
    );
    await expect(model.forwardBackward(new Float32Array(12), [0, 0.5])).rejects.toEqual(invalid);
    await expect(model.forwardBackward(new Float32Array(12), [0, 1], 3)).rejects.toEqual(invalid);
    await expect(model.predict(new Float32Array(7))).rejects.toEqual(invalid);
    await expect(model.forwardBackward(new Float32Array(12).fill(NaN), [0, 1])).rejects.toThrow(/NaN/);
    expect(() => model.writeParams(new Float32Array(3))).toThrow(/flatLength/);
    expect(() => createModel(gpu, { kind: 'mlp', hidden: [0] })).toThrow(/hidden\[0\] must be a positive integer/);
    expect(() => createModel(gpu, { kind: 'mlp', activation: 'swish' as 'relu' })).toThrow(
      /unknown activation "swish"; use one of relu, tanh, geluTanh/,
    );
    expect(() => createModel(gpu, { kind: 'rnn' } as never)).toThrow(/unknown model kind/);
    expect(() => createOptimizer(model, { kind: 'sgd', lr: -1 })).toThrow(/lr must be/);
    expect(() => createOptimizer(model, { kind: 'rmsprop' as 'sgd' })).toThrow(invalid);
    model.destroy();
  });
});

describe('mlp activation names', () => {
  it("builds GELU's tanh form as 'geluTanh', and under its old name 'gelu', which recorded checkpoints carry", () => {
    const ops = (activation: 'gelu' | 'geluTanh') => {
      const graph = new Graph();
      new MlpModule([6, 4, 3], activation).call(graph.input([2, 6]));
      return graph.nodes.map((n) => n.op.name);
    };
    expect(ops('geluTanh')).toContain('geluTanh');
    expect(ops('gelu')).toEqual(ops('geluTanh'));
    expect(resolveMlpSpec({ kind: 'mlp', activation: 'gelu' }).activation).toBe('gelu');
  });
});
