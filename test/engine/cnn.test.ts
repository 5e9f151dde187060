/**
 * The CNN: its gradients against finite differences (CPU reference), its
 * flat layout, seeded init, no allocation after warm-up, a short training run
 * on real MNIST digits on the GPU, and bad specs. GPU-vs-CPU gradient
 * agreement for the whole model is an oracle case (test/oracles/conv_pool_cases.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { mixSeed, mulberry32 } from '../../src/data/random.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { batches } from '../../src/data/batches.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { Cnn, cnnParams, cnnSpec } from '../../src/engine/cnn.ts';
import { cnnForwardBackwardCpu, cnnLossCpu } from '../../src/engine/cnn_reference.ts';
import { buildLayout } from '../../src/engine/flat-model.ts';
import { createModel, createOptimizer, PARAM_ALIGN } from '../../src/engine/index.ts';
import { initTensor, seededNormal, seededUniform } from '../../src/engine/random.ts';

const invalid = expect.objectContaining({ code: ErrorCode.InvalidArgument });

describe('cnn gradients (CPU reference) match finite differences', () => {
  // A tiny CNN (2 and 3 filters) on 2 seeded images. No single step fits
  // every entry: larger steps cross ReLU/max-pool kinks (a conv1 weight
  // touches every pixel; at 1e-2 some differences were off by 30%), smaller
  // ones drown in the float32 rounding of the loss (~1e-7 / 2·step). So each
  // entry is checked at three steps and must match at one of them; a wrong
  // gradient matches at none.
  for (const hidden of [0, 5]) {
    it(`every tensor, sampled, hidden ${hidden}`, () => {
      const spec = cnnSpec({ channels: [2, 3], hidden, seed: 4 });
      const decls = cnnParams(spec);
      const { layout, flatLength } = buildLayout(decls);
      const params = new Float32Array(flatLength);
      const rand = { uniform: seededUniform(11), normal: seededNormal(12) };
      // Non-zero biases too, so their gradients are not trivially routed.
      decls.forEach((d, i) => initTensor(params.subarray(layout[i].offset, layout[i].offset + layout[i].length), d.init === 'zeros' ? 'glorot' : d.init, d.fanIn, d.fanOut, rand));
      const random = mulberry32(mixSeed(5, hidden));
      const x = Float32Array.from({ length: 2 * 784 }, () => random());
      const labels = [3, 8];
      const { grads } = cnnForwardBackwardCpu(spec, params, x, labels);
      const steps = [1e-4, 3e-4, 1e-3];
      let checked = 0;
      for (const e of layout) {
        // Six entries per tensor, spread over it.
        for (let k = 0; k < 6; k++) {
          const i = e.offset + Math.floor(((k + 0.5) * e.length) / 6);
          const saved = params[i];
          const numeric = steps.map((eps) => {
            params[i] = saved + eps;
            const up = cnnLossCpu(spec, params, x, labels);
            params[i] = saved - eps;
            const down = cnnLossCpu(spec, params, x, labels);
            params[i] = saved;
            return (up - down) / (2 * eps);
          });
          const closest = Math.min(...numeric.map((n) => Math.abs(n - grads[i]) - 0.01 * Math.abs(n)));
          expect(closest, `${e.name}[${i - e.offset}]: numeric ${numeric.join(', ')}, analytic ${grads[i]}`).toBeLessThanOrEqual(5e-4);
          checked++;
        }
      }
      expect(checked).toBe(layout.length * 6);
      // The gradient is not trivially zero: the check above has something to compare.
      expect(grads.reduce((a, v) => a + Math.abs(v), 0)).toBeGreaterThan(1e-2);
    });
  }
});

describe('cnn on the GPU', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('lays out conv1, conv2 and the dense head in order, 256-byte aligned', () => {
    const model = createModel(gpu, { kind: 'cnn', channels: [8, 16] });
    expect(model.kind).toBe('cnn');
    expect(model.layout.map((e) => [e.name, e.shape])).toEqual([
      ['conv1.weight', [8, 1, 5, 5]],
      ['conv1.bias', [8]],
      ['conv2.weight', [16, 8, 5, 5]],
      ['conv2.bias', [16]],
      ['dense0.weight', [16 * 7 * 7, 10]],
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
    await expect(model.forwardBackward(new Float32Array(2 * 700), [1, 2])).rejects.toThrow(/x has 1400 floats but batch 2 × inputSize 784/);
    await expect(model.forwardBackward(new Float32Array(784), [10])).rejects.toThrow(/labels must be integers in \[0, 10\)/);
    model.destroy();
  });
});
