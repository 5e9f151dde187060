/**
 * bench/transformer: training steps of the built-in transformer
 * (the words workload: 105,627 parameters, AdamW, batches of words drawn with
 * replacement, padded to 32 positions) on this runtime's WebGPU adapter, ours
 * against the same model written in TF.js ops (bench/tfjs-transformer.ts) on
 * TF.js's WebGPU backend, which asks the same navigator.gpu for its adapter.
 *
 * Both start from the same weights (ours, copied by name) and train on the
 * same batches in the same order with the same hyperparameters (a constant
 * lr: the schedule does not change a step's work). The first two steps check
 * that they are the same model: the loss on batch 0 from equal weights, and
 * on batch 1 after one AdamW step (gradients and update agree only if this
 * one does). They and --warmup more steps compile the shaders; then each
 * side times --steps steps, ours then TF.js (the order alternates over
 * --rounds), neither reading its loss before the last step of a round.
 *
 * Figures per side: tokens/s (counted targets: each word's letters and its
 * end, not padding), positions/s (batch × 32 per step), seconds and CPU
 * seconds per step (utime + stime of this process from /proc, all threads:
 * the software adapter works on them; on a shared machine the fair figure).
 *
 * TF.js needs its gradient registry (tfjs-gradients.node.ts). It loads under
 * Node; under Deno it does not, and the line says why (tfjs: null).
 *
 *   nice -n 10 npx tsx bench/transformer.ts --steps 5 --batch 256 [--warmup 1] [--rounds 1] [--seed 1]
 *   nice -n 10 deno run -A bench/transformer.ts --steps 5 --batch 256
 *   nice -n 10 npx tsx bench/transformer.ts --runtimes node,deno --steps 5   (each runtime in turn, one line each)
 *   npx tsx bench/transformer.ts --tfjs off ...   (ours alone)
 *
 * One JSON line per runtime: {"bench":"transformer", runtime, adapter, batch, steps,
 *   ours:{tokens_per_s, positions_per_s, s_per_step, cpu_s_per_step}, tfjs:{…} | null,
 *   tfjs_over_ours, first_loss:{ours, tfjs}, second_loss:{ours, tfjs}, params:{ours, tfjs}}
 */
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { batches, type Batch } from '../src/data/batches.ts';
import { countedTargets } from '../src/data/dataset.ts';
import { loadWords } from '../src/data/words.node.ts';
import { createModel } from '../src/engine/create.ts';
import { createOptimizer } from '../src/engine/optimizer.ts';
import { trainStepDeferred } from '../src/engine/train-step.ts';
import { TRANSFORMER_DEFAULTS } from '../src/engine/transformer.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { DeferredScalars } from '../src/gpu/readback.ts';
import { opt } from './args.ts';
import { runUnderEachRuntime } from './each-runtime.ts';
import { loadTfGradients } from './tfjs-gradients.node.ts';
import type { Tf } from './tfjs-mlp.ts';
import { type AdamwHyper, createTfTransformer, type TfTransformer } from './tfjs-transformer.ts';

if (runUnderEachRuntime('bench/transformer.ts')) process.exit(0);

const steps = Number(opt('steps', '5'));
const warmup = Number(opt('warmup', '1'));
const rounds = Number(opt('rounds', '1'));
const batchSize = Number(opt('batch', '256'));
const seed = Number(opt('seed', '1'));
/** `--tfjs off`: ours alone (TF.js's steps on a software adapter take minutes at batch 256). */
const withTfjs = opt('tfjs', 'on') !== 'off';
for (const [name, value, least] of [
  ['steps', steps, 1],
  ['warmup', warmup, 0],
  ['rounds', rounds, 1],
  ['batch', batchSize, 1],
] as const) {
  if (!Number.isInteger(value) || value < least)
    throw new Error(`--${name} must be an integer ≥ ${least}, got ${value}`);
}
const hyper: AdamwHyper = { lr: 3e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 };
const shape = TRANSFORMER_DEFAULTS;
const log = (what: unknown) =>
  console.error(`bench/transformer: ${typeof what === 'string' ? what : JSON.stringify(what)}`);

/** CPU seconds (user + system, every thread) this process has used. */
function cpuSeconds(): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  }
}

const gpu = await acquireGpu();
const runtime = gpu.info.runtime;
const words = await loadWords();
// Every batch both sides will see: 2 check steps, the warm-up, then rounds × steps.
const drawn: Batch[] = [];
for (const b of batches(words.train, { batchSize, seed, replacement: true })) {
  drawn.push(b);
  if (drawn.length === 2 + warmup + rounds * steps) break;
}

const model = createModel(gpu, { kind: 'transformer', seed });
const optimizer = createOptimizer(model, {
  kind: 'adamw',
  lr: hyper.lr,
  betas: [hyper.beta1, hyper.beta2],
  eps: hyper.eps,
  weightDecay: hyper.weightDecay,
});
const flat = await model.readParams();
const init = Object.fromEntries(model.layout.map((e) => [e.name, flat.slice(e.offset, e.offset + e.length)]));

/** TF.js on WebGPU with its gradients, or why not. */
async function loadTf(): Promise<{ tf: Tf } | { error: string }> {
  if (!withTfjs) return { error: 'not run (--tfjs off)' };
  if (runtime === 'node') {
    // TF.js finds WebGPU at navigator.gpu; Node's comes from the `webgpu` package, as ours (device.node.ts).
    const { nodeGpu } = await import('../src/gpu/device.node.ts');
    const gpuApi = await nodeGpu();
    const nav = (globalThis as { navigator?: object }).navigator;
    if (nav) Object.defineProperty(nav, 'gpu', { value: gpuApi, configurable: true });
    else Object.assign(globalThis, { navigator: { gpu: gpuApi } });
  }
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/tfjs-backend-webgpu');
  if (!(await tf.setBackend('webgpu')))
    return { error: 'tf.setBackend("webgpu") failed: TF.js found no WebGPU adapter' };
  await tf.ready();
  try {
    await loadTfGradients(runtime === 'node');
  } catch (err) {
    return { error: `tfjs-core's gradient registry did not load, so TF.js has no autodiff here: ${String(err)}` };
  }
  return { tf };
}
const loaded = await loadTf();
let theirs: TfTransformer | undefined;
if ('tf' in loaded) theirs = createTfTransformer(loaded.tf, shape, init, hyper);
else log(loaded.error);

const round4 = (v: number) => Math.round(v * 1e4) / 1e4;
const readTf = async (t: Tf): Promise<number> => {
  const [value] = await t.data();
  t.dispose();
  return value;
};

// The same-model check: batch 0 from equal weights, batch 1 after one AdamW step.
const checkLoss = async (b: Batch) => {
  const ours = await model.forwardBackward(b.x, b.labels);
  optimizer.step();
  const tfjs = theirs ? await readTf(theirs.step(b.x, b.labels)) : null;
  return {
    ours: round4(ours),
    tfjs: tfjs === null ? null : round4(tfjs),
    diff: tfjs === null ? null : Math.abs(ours - tfjs),
  };
};
const first = await checkLoss(drawn[0]);
const second = await checkLoss(drawn[1]);
log({ first_loss: first, second_loss: second, ln27: round4(Math.log(shape.vocab)) });

const sink = new DeferredScalars(gpu, steps);
const side = () => ({ seconds: 0, cpu: 0, steps: 0, tokens: 0, positions: 0, lastLoss: NaN });
const ours = side();
const tfjs = side();

async function runOurs(part: Batch[], into: ReturnType<typeof side> | undefined): Promise<void> {
  const [t0, c0] = [performance.now(), cpuSeconds()];
  for (const b of part) trainStepDeferred(model, optimizer, b.x, b.labels, sink);
  const losses = await sink.collect();
  if (into) tally(into, part, t0, c0, losses.at(-1)!);
}
async function runTfjs(part: Batch[], into: ReturnType<typeof side> | undefined): Promise<void> {
  const [t0, c0] = [performance.now(), cpuSeconds()];
  let last: Tf;
  for (const [i, b] of part.entries()) {
    const loss = theirs!.step(b.x, b.labels);
    if (i + 1 < part.length)
      loss.dispose(); // disposing a pending tensor does not wait for it
    else last = loss;
  }
  const loss = await readTf(last);
  if (into) tally(into, part, t0, c0, loss);
}
function tally(s: ReturnType<typeof side>, part: Batch[], t0: number, c0: number, loss: number): void {
  s.seconds += (performance.now() - t0) / 1000;
  s.cpu += cpuSeconds() - c0;
  s.steps += part.length;
  for (const b of part) {
    s.tokens += countedTargets(b.labels);
    s.positions += b.size * shape.context;
  }
  s.lastLoss = loss;
}

let next = 2;
const take = (n: number) => drawn.slice(next, (next += n));
if (warmup > 0) {
  const part = take(warmup);
  await runOurs(part, undefined);
  if (theirs) await runTfjs(part, undefined);
}
for (let r = 0; r < rounds; r++) {
  const part = take(steps);
  const order = r % 2 === 0 ? [runOurs, runTfjs] : [runTfjs, runOurs];
  for (const run of order) {
    if (run === runTfjs && !theirs) continue;
    await run(part, run === runOurs ? ours : tfjs);
    log(`round ${r + 1}/${rounds}: ${run === runOurs ? 'ours' : 'tfjs'} done`);
  }
}

const figures = (s: ReturnType<typeof side>) => ({
  tokens_per_s: Math.round(s.tokens / s.seconds),
  positions_per_s: Math.round(s.positions / s.seconds),
  s_per_step: round4(s.seconds / s.steps),
  cpu_s_per_step: round4(s.cpu / s.steps),
  last_loss: round4(s.lastLoss),
});
const oursFigures = figures(ours);
const tfFigures = theirs ? figures(tfjs) : null;
console.log(
  JSON.stringify({
    bench: 'transformer',
    runtime,
    adapter: gpu.info.description,
    batch: batchSize,
    steps,
    rounds,
    warmup,
    seed,
    ours: oursFigures,
    tfjs: tfFigures,
    tfjs_over_ours: tfFigures ? round4(tfFigures.tokens_per_s / oursFigures.tokens_per_s) : null,
    tfjs_over_ours_cpu: tfFigures ? round4(tfFigures.cpu_s_per_step / oursFigures.cpu_s_per_step) : null,
    first_loss: { ours: first.ours, tfjs: first.tfjs },
    second_loss: { ours: second.ours, tfjs: second.tfjs },
    first_loss_diff: first.diff,
    params: { ours: model.paramCount, tfjs: theirs?.paramCount ?? null },
    ...('error' in loaded ? { tfjs_unavailable: loaded.error } : {}),
  }),
);
theirs?.dispose();
sink.destroy();
optimizer.destroy();
model.destroy();
gpu.destroy();
