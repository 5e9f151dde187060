/**
 * GPT-2's training step on whatever adapter runs it: one JSON line with tokens/s, the step time and
 * the planned GPU bytes (what `train --dry-run` counts), at GPT-2 small's shape (12 layers, width 768,
 * 12 heads, vocabulary 50,257, context 1,024, batch 8, AdamW) or the largest one the adapter's limits
 * take: the batch halves, then the context, until the plan fits. Seeded random tokens; the first step
 * (pipeline compilation) is a warm-up outside the figures. `precision` is f32 (f16-mixed is planned
 * elsewhere; the field is there for it). On a CPU adapter give a small shape: GPT-2's own takes minutes
 * a step and about 7 GiB of RAM.
 *
 *   deno run -A bench/gpt2.ts [--layers 12 --width 768 --heads 12 --context 1024 --batch 8 --vocab 50257 --steps 3]
 *   deno run -A bench/gpt2.ts --layers 1 --width 64 --heads 4 --context 1024 --batch 1 --steps 2
 */
import { planDryRun } from '../src/cli/commands/dry-run.ts';
import { createModel, createOptimizer, type ModelSpec } from '../src/engine/index.ts';
import { seededUniform } from '../src/engine/random.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import type { Gpu } from '../src/gpu/gpu.ts';
import { opt } from './args.ts';
import { median } from '../src/core/stats.ts';

const [layers, width, heads, context, vocab, steps, batch] = [
  ['layers', '12'],
  ['width', '768'],
  ['heads', '12'],
  ['context', '1024'],
  ['vocab', '50257'],
  ['steps', '3'],
  ['batch', '8'],
].map(([k, fallback]) => Number(opt(k, fallback)));
const precision = opt('precision', 'f32');
if (precision !== 'f32') throw new Error(`bench/gpt2.ts: --precision ${precision} is not planned here yet; use f32`);

const spec = (T: number): ModelSpec => ({
  kind: 'transformer',
  arch: 'gpt2',
  seed: 1,
  layers,
  width,
  heads,
  vocab,
  context: T,
  positions: context,
});
const dry = { model: 'transformer', optimizer: 'adamw', lr: 1e-4, momentum: 0.9, weightDecay: 0.01 } as const;

/** The largest shape whose plan the adapter takes: batch halves first, then context. */
function fitting(gpu: Gpu): { batch: number; context: number; planned: ReturnType<typeof planDryRun> } {
  let [b, T] = [batch, context];
  for (;;) {
    try {
      return { batch: b, context: T, planned: planDryRun(gpu, spec(T), { ...dry, batch: b }) };
    } catch (err) {
      if (b === 1 && T === 1) throw err;
      if (b > 1) b = Math.ceil(b / 2);
      else T = Math.ceil(T / 2);
    }
  }
}

const gpu = await acquireGpu();
const fit = fitting(gpu);
const model = createModel(gpu, spec(fit.context));
const optimizer = createOptimizer(model, { kind: 'adamw', lr: 1e-4 });
const u = seededUniform(3);
const tokens = fit.batch * fit.context;
const ids = () => Float32Array.from({ length: tokens }, () => Math.floor(u() * vocab));
const ms: number[] = [];
const losses: number[] = [];
for (let s = 0; s <= steps; s++) {
  const [x, y] = [ids(), Array.from(ids())];
  const t0 = performance.now();
  losses.push(await model.forwardBackward(x, y, fit.batch));
  optimizer.step();
  await gpu.sync();
  if (s > 0) ms.push(performance.now() - t0);
}
console.log(
  JSON.stringify({
    bench: 'gpt2',
    precision,
    layers,
    width,
    heads,
    vocab,
    context: fit.context,
    batch: fit.batch,
    asked: { context, batch },
    params: model.paramCount,
    step_ms: Number(median(ms).toFixed(1)),
    tokens_per_s: Number(((tokens * 1000) / median(ms)).toFixed(1)),
    planned_gpu_bytes: fit.planned.planned_gpu_bytes,
    planned_gpu_bytes_by_part: fit.planned.planned_gpu_bytes_by_part,
    losses: losses.map((l) => Number(l.toFixed(4))),
    runtime: gpu.info.runtime,
    adapter: gpu.info.description,
  }),
);
optimizer.destroy();
model.destroy();
gpu.destroy();
