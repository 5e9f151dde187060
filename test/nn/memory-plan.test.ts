/**
 * The memory plan (src/nn/memory-plan.ts, passes 4-5 of src/nn/plan.ts): buffers are lent by span
 * of the step, and a plan that shares them still computes what the CPU executor computes, step
 * after step (a buffer lent on holds the last user's numbers, never zeros), for both transformer
 * architectures (residuals, in-place GELU gradients, tied weights).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Transformer } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { BufferReuse, Timeline } from '../../src/nn/memory-plan.ts';
import { compilePlan } from '../../src/nn/plan.ts';
import { seededUniform } from '../../src/nn/random.ts';
import { Graph } from '../../src/nn/tensor.ts';
import { checkModel } from './model-check.ts';

function fakeBuffers(): { reuse: BufferReuse; made: { words: number; label: string }[] } {
  const made: { words: number; label: string }[] = [];
  const reuse = new BufferReuse((words, label) => {
    made.push({ words, label });
    return { size: words * 4, label } as unknown as GPUBuffer;
  });
  return { reuse, made };
}

describe('BufferReuse', () => {
  it('lends a buffer to spans that do not meet, and to smaller values, never to spans that meet', () => {
    const { reuse, made } = fakeBuffers();
    const a = reuse.take(100, { from: 0, to: 3 }, 'a');
    const b = reuse.take(100, { from: 3, to: 5 }, 'b'); // meets a at 3
    const c = reuse.take(60, { from: 4, to: 9 }, 'c'); // a is free from 4 on
    const d = reuse.take(100, { from: 6, to: 7 }, 'd'); // b is free; a is c's until 9
    expect(b.buffer).not.toBe(a.buffer);
    expect(c.buffer).toBe(a.buffer);
    expect(c.size).toBe(240);
    expect(d.buffer).toBe(b.buffer);
    expect(made.map((m) => m.label)).toEqual(['a', 'b']);
  });

  it('takes the smallest free buffer that fits, and only an equal one when asked for exactly', () => {
    const { reuse, made } = fakeBuffers();
    const big = reuse.take(1000, { from: 0, to: 0 }, 'big');
    const small = reuse.take(10, { from: 0, to: 0 }, 'small');
    expect(reuse.take(8, { from: 1, to: 1 }, 'x').buffer).toBe(small.buffer);
    expect(reuse.take(20, { from: 2, to: 2 }, 'y').buffer).toBe(big.buffer);
    expect(reuse.take(8, { from: 3, to: 3 }, 'z', true).buffer).not.toBe(small.buffer);
    expect(made.map((m) => m.words)).toEqual([1000, 10, 8]);
  });

  it('lends the gap between the spans of a value kept as f16 in between, never either span', () => {
    const { reuse } = fakeBuffers();
    const value = reuse.take(
      100,
      [
        { from: 0, to: 2 },
        { from: 8, to: 9 },
      ],
      'value',
    );
    expect(reuse.take(100, { from: 3, to: 7 }, 'between').buffer).toBe(value.buffer);
    expect(reuse.take(100, { from: 7, to: 8 }, 'meets the second').buffer).not.toBe(value.buffer);
    expect(
      reuse.take(
        100,
        [
          { from: 2, to: 2 },
          { from: 10, to: 11 },
        ],
        'meets the first',
      ).buffer,
    ).not.toBe(value.buffer);
  });

  it('gives the whole step to what the caller touches outside it', () => {
    const t = new Timeline(4);
    expect(t.whole().from).toBeLessThan(t.forward(0));
    expect(t.whole().to).toBeGreaterThan(t.backward(0));
    expect(t.forward(3)).toBeLessThan(t.backward(3));
    expect(t.backward(3)).toBeLessThan(t.backward(2));
  });
});

describe('a plan that shares buffers', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  const spec = { vocab: 11, context: 8, width: 32, heads: 2, layers: 3, seed: 5 };
  const batch = 2;
  const data = (seed: number) => {
    const u = seededUniform(seed);
    const x = Float32Array.from({ length: batch * spec.context }, () => Math.floor(u() * spec.vocab));
    const y = Array.from({ length: batch * spec.context }, (_, i) => (i % 5 === 4 ? -1 : Math.floor(u() * spec.vocab)));
    return { x, y };
  };

  for (const arch of ['classic', 'gpt2'] as const) {
    it(`${arch}: shares buffers among values and gradients, holds fewer bytes than a buffer per value and gradient, and its gradients equal the CPU executor's on a second step`, async () => {
      const model = new Transformer(gpu, { ...spec, arch });
      try {
        const graph = new Graph();
        const out = model.module.call(graph.input([batch, spec.context], { dtype: 'u32' }));
        const plan = compilePlan(gpu, graph.nodes, [out], {
          params: model.params,
          grads: model.grads,
          entry: (p) => model.layout[model.module.namedParameters().findIndex(([, q]) => q === p)],
        });
        const values = plan.nodes.filter((n) => !n.op.view).map((n) => n.output);
        const grads = values.map((t) => plan.grad(t)!).filter((g) => g !== null);
        const ranges = [...values.map((t) => plan.value(t)), ...grads];
        const unshared = values.reduce((s, t) => s + t.size * 4, 0) + grads.reduce((s, g) => s + g.size!, 0);
        const planned = plan.buffers.reduce((s, b) => s + b.size, 0);
        const distinct = new Set(ranges.map((r) => r.buffer)).size;
        for (const b of plan.buffers) b.destroy();
        expect(grads.length).toBeGreaterThan(20);
        expect(distinct).toBeLessThan(ranges.length / 2);
        expect(planned).toBeLessThan(unshared);

        // The first step leaves its numbers in every shared buffer; the second must not read them.
        const first = data(1);
        await model.forwardBackward(first.x, first.y);
        const second = data(2);
        const r = await checkModel(model, second.x, second.y);
        expect(r.gradMass).toBeGreaterThan(0);
        expect(Math.abs(r.loss - r.cpuLoss)).toBeLessThan(1e-5);
        expect(r.gradError).toBeLessThan(1e-5);
      } finally {
        model.destroy();
      }
    });
  }
});
