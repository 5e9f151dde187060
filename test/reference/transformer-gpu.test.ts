/** The GPU transformer (src/engine/transformer.ts) against the f64 CPU reference, under Node and Deno. */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { Transformer } from '../../src/engine/transformer.ts';
import { transformerTensorShapes, WORDS_TRANSFORMER } from '../../src/reference/transformer.ts';
import { checkTransformer, GPT2_CHECK_SCALE, SMALL_GPT2, type TransformerCheck } from './transformer-gpu-check.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

/** f32 on the GPU against f64: logits to 1e-4, the loss to 1e-5 relative, gradients to 2% of their size (+1e-5). */
function expectAgreement(r: TransformerCheck): void {
  expect(r.layoutMatches, 'layout = the PyTorch state dict, in order').toBe(true);
  expect(r.worstLogit).toBeLessThan(1e-4);
  expect(Math.abs(r.loss - r.referenceLoss) / r.referenceLoss).toBeLessThan(1e-5);
  for (const [name, k, gpu, fd] of r.grads) {
    expect(Math.abs(gpu - fd), `${name}[${k}]: GPU ${gpu}, finite difference ${fd}`).toBeLessThan(
      0.02 * Math.abs(fd) + 1e-5,
    );
  }
  // The probes must see real gradients, or the comparison proves nothing.
  expect(r.grads.filter(([, , , fd]) => Math.abs(fd) > 1e-4).length).toBeGreaterThanOrEqual(8);
}

describe('the GPU transformer against the CPU reference', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it("is the spec's model at the default size: 105,627 parameters under the state-dict names", () => {
    const model = new Transformer(gpu);
    try {
      expect(model.paramCount).toBe(105_627);
      expect(model.layout.map((e) => [e.name, e.shape])).toEqual(transformerTensorShapes(WORDS_TRANSFORMER));
      expect([model.inputSize, model.classes, model.positions]).toEqual([32, 27, 32]);
    } finally {
      model.destroy();
    }
  });

  it('gives the reference logits, loss and gradients under Node', async () => {
    expectAgreement(await checkTransformer(gpu));
  });

  it("gives the reference logits, loss and gradients in GPT-2's architecture (tied head, tanh GELU) under Node", async () => {
    expectAgreement(await checkTransformer(gpu, SMALL_GPT2, GPT2_CHECK_SCALE));
  });

  it('and under Deno', () => {
    expect(existsSync(deno), `Deno is missing at ${deno}: run npm ci`).toBe(true);
    const script = `import { acquireGpu } from './src/gpu/device.ts';
import { checkTransformer, GPT2_CHECK_SCALE, SMALL_GPT2 } from './test/reference/transformer-gpu-check.ts';
const gpu = await acquireGpu();
console.log(JSON.stringify({ runtime: 'deno', ...(await checkTransformer(gpu)) }));
console.log(JSON.stringify({ runtime: 'deno', ...(await checkTransformer(gpu, SMALL_GPT2, GPT2_CHECK_SCALE)) }));
gpu.destroy();`;
    const run = spawnSync(deno, ['eval', '--ext=ts', script], { cwd: root, encoding: 'utf8', timeout: 300_000 });
    expect(run.status, run.stderr.slice(-2000)).toBe(0);
    const [classic, gpt2] = run.stdout
      .trim()
      .split('\n')
      .slice(-2)
      .map((line) => JSON.parse(line));
    for (const r of [classic, gpt2]) {
      expect(r.runtime).toBe('deno');
      expectAgreement(r);
    }
  });
});
