/**
 * An evaluation plans the forward alone (no gradient buffer, no backward step)
 * and runs in chunks that fit the adapter's binding limit, measured on the
 * plan of one window: a limit that one chunk of every window exceeds still
 * evaluates, to the same metrics as one chunk on an adapter without it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { Transformer } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { compilePlan, type Plan, recordSteps } from '../../src/nn/plan.ts';
import { seededUniform } from '../../src/nn/random.ts';
import { Graph } from '../../src/nn/index.ts';

const SPEC = { vocab: 7, context: 8, width: 16, heads: 2, layers: 1, seed: 3 };
/** Bytes one binding may hold on the limited Gpu: every weight fits, a chunk of every window does not. */
const LIMIT = 8 * 1024;
const WINDOWS = 40;

function windows(count: number, seed: number): { x: Float32Array; y: Int32Array } {
  const u = seededUniform(seed);
  const x = Float32Array.from({ length: count * SPEC.context }, () => Math.floor(u() * SPEC.vocab));
  const y = Int32Array.from({ length: count * SPEC.context }, () => Math.floor(u() * SPEC.vocab));
  return { x, y };
}

let gpu: Gpu;
let limited: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
  limited = await acquireGpu({ maxBindingBytes: LIMIT });
});
afterAll(() => {
  gpu?.destroy();
  limited?.destroy();
});

/** The model's forward at `batch` windows, eval mode, planned with or without gradients. */
function planForward(
  model: Transformer,
  batch: number,
  gradients: boolean,
): { plan: Plan; input: ReturnType<Graph['input']>; output: ReturnType<Graph['input']> } {
  const graph = new Graph();
  const input = graph.input([batch, SPEC.context], { dtype: 'u32' });
  model.module.train(false);
  const output = model.module.call(input);
  const named = model.module.namedParameters();
  const entry = (p: unknown) => model.layout[named.findIndex(([, q]) => q === p)];
  return {
    plan: compilePlan(gpu, graph.nodes, [output], { params: model.params, grads: model.grads, entry }, { gradients }),
    input,
    output,
  };
}

describe('evaluation', () => {
  it('plans the forward alone: no gradient buffer, no backward step, the same outputs as the training plan', async () => {
    const model = new Transformer(gpu, SPEC);
    const full = planForward(model, 4, true);
    const forward = planForward(model, 4, false);
    expect(full.plan.backward.length).toBeGreaterThan(0);
    const isGradient = (label: string) => label.includes(':grad') || label.includes('dscores');
    expect(full.plan.buffers.some((b) => isGradient(b.label))).toBe(true);
    expect(forward.plan.backward).toEqual([]);
    expect(forward.plan.buffers.filter((b) => isGradient(b.label)).map((b) => b.label)).toEqual([]);
    expect(forward.plan.grad(forward.output)).toBeNull();
    const bytes = (p: Plan) => p.buffers.reduce((s, b) => s + b.size, 0);
    expect(bytes(forward.plan)).toBeLessThan(bytes(full.plan) / 1.5);

    const { x } = windows(4, 1);
    const outputs: Float32Array[] = [];
    for (const p of [full, forward]) {
      const v = p.plan.value(p.input);
      gpu.write(v.buffer, Uint32Array.from(x), v.offset);
      recordSteps(gpu, p.plan.forward);
      const out = p.plan.value(p.output);
      outputs.push(await gpu.readF32(out.buffer, (out.offset ?? 0) / 4, p.output.size));
    }
    expect(outputs[1]).toEqual(outputs[0]);
    for (const p of [full, forward]) for (const b of p.plan.buffers) b.destroy();
    model.destroy();
  });

  it('runs in chunks within the binding limit, to the metrics of one chunk without the limit', async () => {
    const { x, y } = windows(WINDOWS, 2);
    const free = new Transformer(gpu, SPEC);
    const whole = await free.evaluate(x, y, WINDOWS);
    free.destroy();

    const model = new Transformer(limited, SPEC);
    // All the windows at once bind more than the limit: refused, naming the limit.
    await expect(model.evaluate(x, y, WINDOWS)).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      detail: expect.objectContaining({ max: LIMIT }),
    });
    const chunked = await model.evaluate(x, y);
    expect(chunked.accuracy).toBe(whole.accuracy);
    expect(Math.abs(chunked.loss - whole.loss)).toBeLessThan(1e-6 * Math.abs(whole.loss));
    model.destroy();
  });

  it('refuses a binding cap that is not a whole number of words', async () => {
    await expect(acquireGpu({ maxBindingBytes: 1001 })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
  });
});
