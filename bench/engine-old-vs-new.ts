/**
 * Temporary: the hand-wired MLP/CNN against the same models on the autodiff
 * core (src/nn), same adapter, same run, alternating rounds, best of each.
 * deno run -A bench/engine-old-vs-new.ts
 */
import { acquireGpu } from '../src/gpu/device.ts';
import { Mlp as OldMlp } from '../src/engine/mlp-hand.ts';
import { Cnn as OldCnn } from '../src/engine/cnn-hand.ts';
import { Mlp } from '../src/engine/mlp.ts';
import { Cnn } from '../src/engine/cnn.ts';
import { createOptimizer, trainStep, type Model } from '../src/engine/index.ts';
import { seededUniform } from '../src/engine/random.ts';
import { opt } from './args.ts';

const gpu = await acquireGpu();
const rounds = Number(opt('rounds', '6'));
const u = seededUniform(3);
async function time(make: () => Model, batch: number, steps: number): Promise<number> {
  const model = make();
  const opt = createOptimizer(model, { kind: 'sgd', lr: 0.01, momentum: 0.9 });
  const x = Float32Array.from({ length: batch * 784 }, () => u());
  const y = Uint32Array.from({ length: batch }, (_, i) => i % 10);
  for (let i = 0; i < 2; i++) await trainStep(model, opt, x, y);
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) await trainStep(model, opt, x, y);
  const ms = (performance.now() - t0) / steps;
  model.destroy();
  opt.destroy();
  return ms;
}
const cases = [
  { name: 'mlp 784-512-512-10 batch 128', batch: 128, steps: 10, old: () => new OldMlp(gpu, { kind: 'mlp', seed: 1, hidden: [512, 512] }), now: () => new Mlp(gpu, { kind: 'mlp', seed: 1, hidden: [512, 512] }) },
  { name: 'cnn 8,16 batch 32', batch: 32, steps: 10, old: () => new OldCnn(gpu, {}), now: () => new Cnn(gpu, {}) },
];
const out: Record<string, unknown>[] = [];
for (const c of cases) {
  let old = Infinity;
  let now = Infinity;
  for (let r = 0; r < rounds; r++) {
    old = Math.min(old, await time(c.old, c.batch, c.steps));
    now = Math.min(now, await time(c.now, c.batch, c.steps));
  }
  out.push({ case: c.name, old_ms: +old.toFixed(2), new_ms: +now.toFixed(2), new_over_old: +(now / old).toFixed(3) });
}
console.log(JSON.stringify({ adapter: gpu.info.description, runtime: gpu.info.runtime, results: out }));
gpu.destroy();
