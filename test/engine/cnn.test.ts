/**
 * The CNN on the model API: its gradients (GPU against the CPU executor, and
 * the CPU's against finite differences), its flat layout, seeded init that
 * matches the He/Glorot draws of the hand-wired CNN it replaced, no
 * allocation after warm-up, a short training run on real MNIST digits, and
 * bad specs. GPU-vs-CPU gradient agreement is also an oracle case under Node
 * and Deno (test/oracles/cnn-cases.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { mixSeed, mulberry32 } from '../../src/data/random.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { batches } from '../../src/data/batches.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { Cnn } from '../../src/engine/cnn.ts';
import { createModel, createOptimizer, PARAM_ALIGN } from '../../src/engine/index.ts';
import { initTensor, seededNormal, seededUniform } from '../../src/engine/random.ts';
import { checkModel } from '../nn/model-check.ts';

const invalid = expect.objectContaining({ code: ErrorCode.InvalidArgument });

describe('cnn on the GPU', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  for (const hidden of [0, 5]) {
    it(`gradients: GPU = CPU executor = finite differences (hidden ${hidden})`, async () => {
      const model = new Cnn(gpu, { channels: [2, 3], hidden, seed: 4 });
      // Non-zero biases too, so their gradients are not trivially routed.
      const flat = await model.readParams();
      const u = seededUniform(11);
      for (const e of model.layout)
        if (e.name.endsWith('bias')) for (let i = 0; i < e.length; i++) flat[e.offset + i] = 0.2 * (2 * u() - 1);
      model.writeParams(flat);
      const random = mulberry32(mixSeed(5, hidden));
      const x = Float32Array.from({ length: 2 * 784 }, () => random());
      const c = await checkModel(model, x, [3, 8], 6);
      expect(Math.abs(c.loss - c.cpuLoss)).toBeLessThan(1e-5);
      expect(c.gradError).toBeLessThan(5e-6);
      expect(c.numeric, 'worst numeric/analytic mismatch over tolerance').toBeLessThanOrEqual(1);
      expect(c.gradMass).toBeGreaterThan(1e-2);
      model.destroy();
    });
  }

  it('starts from the He/Glorot draws of the hand-wired CNN (dense weights drawn [in, out], stored [out, in])', async () => {
    const model = new Cnn(gpu, { channels: [2, 3], hidden: 5, seed: 9 });
    const flat = await model.readParams();
    const rand = { uniform: seededUniform(9), normal: seededNormal(9 ^ 0x9e3779b9) };
    const draws: [string, 'he' | 'glorot' | 'zeros', number, number][] = [
      ['conv1.weight', 'he', 25, 50],
      ['conv1.bias', 'zeros', 25, 2],
      ['conv2.weight', 'he', 50, 75],
      ['conv2.bias', 'zeros', 50, 3],
      ['dense0.weight', 'he', 147, 5],
      ['dense0.bias', 'zeros', 147, 5],
      ['dense1.weight', 'glorot', 5, 10],
      ['dense1.bias', 'zeros', 5, 10],
    ];
    for (const [name, kind, fanIn, fanOut] of draws) {
      const e = model.layout.find((l) => l.name === name)!;
      const want = new Float32Array(e.length);
      initTensor(want, kind, fanIn, fanOut, rand);
      const got = flat.slice(e.offset, e.offset + e.length);
      if (name.startsWith('dense') && e.shape.length === 2) {
        const [out, inF] = e.shape;
        const drawn = Float32Array.from(want);
        for (let o = 0; o < out; o++) for (let i = 0; i < inF; i++) want[o * inF + i] = drawn[i * out + o];
      }
      expect(got, name).toEqual(want);
    }
    model.destroy();
  });

  it('lays out conv1, conv2 and the dense head in order, 256-byte aligned', () => {
    const model = createModel(gpu, { kind: 'cnn', channels: [8, 16] });
    expect(model.kind).toBe('cnn');
    expect(model.layout.map((e) => [e.name, e.shape])).toEqual([
      ['conv1.weight', [8, 1, 5, 5]],
      ['conv1.bias', [8]],
      ['conv2.weight', [16, 8, 5, 5]],
      ['conv2.bias', [16]],
      ['dense0.weight', [10, 16 * 7 * 7]],
      ['dense0.bias', [10]],
    ]);
    expect(model.paramCount).toBe(8 * 25 + 8 + 16 * 8 * 25 + 16 + 784 * 10 + 10);
    for (const e of model.layout) expect(e.offset % PARAM_ALIGN).toBe(0);
    expect(model.inputSize).toBe(784);
    model.destroy();
  });

  it('same seed, same parameters; another seed, others', async () => {
    const [a, b, c] = [1, 1, 2].map((seed) => new Cnn(gpu, { channels: [2, 3], seed }));
    const [pa, pb, pc] = [await a.readParams(), await b.readParams(), await c.readParams()];
    expect(pa).toEqual(pb);
    expect(pa).not.toEqual(pc);
    for (const m of [a, b, c]) m.destroy();
  });

  it('trains on real digits: the loss falls over 20 steps, and no GPU buffer is created after the first', async () => {
    const { train } = await loadMnist();
    const model = new Cnn(gpu, { channels: [4, 8], seed: 1 });
    const optimizer = createOptimizer(model, { kind: 'sgd', lr: 0.05, momentum: 0.9 });
    const losses: number[] = [];
    let allocationsAfterFirst = -1;
    for (const b of batches(train, { batchSize: 16, seed: 7 })) {
      losses.push(await model.forwardBackward(b.x, b.labels));
      optimizer.step();
      if (losses.length === 1) {
        await gpu.sync();
        allocationsAfterFirst = gpu.allocations;
      }
      if (losses.length === 20) break;
    }
    await gpu.sync();
    expect(gpu.allocations).toBe(allocationsAfterFirst);
    const mean = (a: number[]) => a.reduce((s, v) => s + v, 0) / a.length;
    const first = mean(losses.slice(0, 5));
    const last = mean(losses.slice(-5));
    expect(first).toBeGreaterThan(1.5); // about ln 10 at the start
    expect(last, `losses ${losses.map((l) => l.toFixed(3)).join(' ')}`).toBeLessThan(0.75 * first);
    optimizer.destroy();
    model.destroy();
  });

  it('refuses a bad spec or a badly shaped batch with a clear error', async () => {
    expect(() => new Cnn(gpu, { channels: [0, 4] })).toThrow(invalid);
    expect(() => new Cnn(gpu, { channels: [4] as unknown as [number, number] })).toThrow(/two positive integers/);
    expect(() => new Cnn(gpu, { hidden: -1 })).toThrow(/hidden must be 0/);
    expect(() => new Cnn(gpu, { classes: 1 })).toThrow(invalid);
    const model = new Cnn(gpu, { channels: [2, 3] });
    await expect(model.forwardBackward(new Float32Array(2 * 700), [1, 2])).rejects.toThrow(
      /x has 1400 floats but batch 2 × inputSize 784/,
    );
    await expect(model.forwardBackward(new Float32Array(784), [10])).rejects.toThrow(
      /labels must be integers in \[0, 10\)/,
    );
    model.destroy();
  });
});
