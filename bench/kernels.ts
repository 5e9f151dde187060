/**
 * Kernel benchmark: our WGSL matmul and MLP training step against TensorFlow.js's
 * WebGPU backend, on the same adapter, in the same run. Meant for Deno
 * (`npm run bench:kernels -- --json`); also runs under Node (`npx tsx bench/kernels.ts`),
 * where TF.js's WebGPU backend may be unavailable (its figures are then null).
 *
 * Prints one JSON line with --json:
 *   {"adapter","runtime","matmul":[{"n","ours_gflops","tfjs_gflops"}...],"mlp_step":{"batch","ours_ms","tfjs_ms"}}
 * Options: --sizes 256,512,1024  --reps N  --steps N  --rounds N
 *
 * Each figure is the best of --rounds timings (default 4), ours and TF.js
 * alternating, so a burst of load from other processes hurts neither side alone.
 */
import { acquireGpu } from '../src/gpu/device.ts';
import { planMatmul } from '../src/gpu/kernels/matmul.ts';
import { createModel, createOptimizer, trainStep } from '../src/engine/index.ts';
import { seededUniform } from '../src/engine/random.ts';
import { createTfMlp, inOut, loadTfWebgpu, type Tf } from './tfjs-mlp.ts';
import { args, opt } from './args.ts';

const json = args.includes('--json');
const sizes = opt('sizes', '256,512,1024').split(',').map(Number);
const stepsToTime = Number(opt('steps', '10'));
const rounds = Number(opt('rounds', '4'));
const MLP = { inputSize: 784, hidden: [512, 512], classes: 10 };
const BATCH = 128;
const LR = 0.01;
const MOMENTUM = 0.9;

const log = (...m: unknown[]) => {
  if (!json) console.log(...m);
};

function randomArray(n: number, seed: number): Float32Array {
  const u = seededUniform(seed);
  return Float32Array.from({ length: n }, () => u() * 2 - 1);
}

/** Repetitions so one timing takes roughly a second on a software adapter, at least 2. */
function repsFor(n: number): number {
  return Number(opt('reps', String(Math.max(2, Math.round(2e9 / (2 * n ** 3))))));
}

const gpu = await acquireGpu();
log(`adapter: ${gpu.info.description} (${gpu.info.runtime})`);

async function oursMatmul(n: number): Promise<number> {
  const a = gpu.upload(randomArray(n * n, 1));
  const b = gpu.upload(randomArray(n * n, 2));
  const c = gpu.storage(n * n);
  const d = planMatmul(gpu, a, b, c, { m: n, n, k: n });
  gpu.record(d);
  await gpu.sync(); // compile + warm-up
  const reps = repsFor(n);
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) gpu.record(d);
  await gpu.sync();
  const s = (performance.now() - t0) / 1000;
  for (const x of [a, b, c]) x.destroy();
  return (2 * n ** 3 * reps) / s / 1e9;
}

async function oursMlpStep(): Promise<number> {
  const model = createModel(gpu, { kind: 'mlp', seed: 1, ...MLP });
  const optimizer = createOptimizer(model, { kind: 'sgd', lr: LR, momentum: MOMENTUM });
  const x = randomArray(BATCH * 784, 3).map((v) => Math.abs(v));
  const y = Uint32Array.from({ length: BATCH }, (_, i) => i % 10);
  for (let i = 0; i < 2; i++) await trainStep(model, optimizer, x, y);
  const t0 = performance.now();
  for (let i = 0; i < stepsToTime; i++) await trainStep(model, optimizer, x, y);
  const ms = (performance.now() - t0) / stepsToTime;
  model.destroy();
  optimizer.destroy();
  return ms;
}

async function loadTf(): Promise<Tf | null> {
  try {
    return await loadTfWebgpu();
  } catch (err) {
    log(`TF.js WebGPU unavailable: ${String(err)}`);
    return null;
  }
}

async function tfMatmul(tf: Tf, n: number): Promise<number> {
  const a = tf.tensor2d(randomArray(n * n, 1), [n, n]);
  const b = tf.tensor2d(randomArray(n * n, 2), [n, n]);
  const warm = tf.matMul(a, b);
  await warm.data();
  warm.dispose();
  const reps = repsFor(n);
  const t0 = performance.now();
  const outs = [];
  for (let i = 0; i < reps; i++) outs.push(tf.matMul(a, b));
  await outs[outs.length - 1].data();
  const s = (performance.now() - t0) / 1000;
  for (const o of outs) o.dispose();
  a.dispose();
  b.dispose();
  return (2 * n ** 3 * reps) / s / 1e9;
}

/** The same model and step in TF.js (bench/tfjs-mlp.ts), from our initial weights. */
async function tfMlpStep(tf: Tf): Promise<number> {
  const model = createModel(gpu, { kind: 'mlp', seed: 1, ...MLP });
  const flat = await model.readParams();
  const widths = [MLP.inputSize, ...MLP.hidden, MLP.classes];
  const tensor = (name: string) => {
    const e = model.layout.find((l) => l.name === name)!;
    return flat.slice(e.offset, e.offset + e.length);
  };
  const theirs = createTfMlp(tf, widths, widths.slice(1).map((_, i) => ({ w: inOut(tensor(`dense${i}.weight`), widths[i + 1], widths[i]), b: tensor(`dense${i}.bias`) })), LR, MOMENTUM);
  model.destroy();
  const x = randomArray(BATCH * 784, 3).map((v) => Math.abs(v));
  const y = Uint32Array.from({ length: BATCH }, (_, i) => i % 10);
  for (let i = 0; i < 2; i++) await theirs.step(x, y);
  const t0 = performance.now();
  for (let i = 0; i < stepsToTime; i++) await theirs.step(x, y);
  const ms = (performance.now() - t0) / stepsToTime;
  theirs.dispose();
  return ms;
}

const tf = await loadTf();
const round = (v: number | null) => (v === null ? null : Math.round(v * 1000) / 1000);
const matmul: { n: number; ours_gflops: number | null; tfjs_gflops: number | null }[] = [];
for (const n of sizes) {
  let ours = 0;
  let theirs: number | null = tf ? 0 : null;
  for (let r = 0; r < rounds; r++) {
    ours = Math.max(ours, await oursMatmul(n));
    if (tf) theirs = Math.max(theirs ?? 0, await tfMatmul(tf, n));
  }
  matmul.push({ n, ours_gflops: round(ours), tfjs_gflops: round(theirs) });
  log(`matmul ${n}: ours ${ours.toFixed(2)} GFLOP/s, tfjs ${theirs?.toFixed(2) ?? 'n/a'} GFLOP/s`);
}
let oursStep = Infinity;
let tfStep: number | null = tf ? Infinity : null;
for (let r = 0; r < rounds; r++) {
  oursStep = Math.min(oursStep, await oursMlpStep());
  if (tf) tfStep = Math.min(tfStep ?? Infinity, await tfMlpStep(tf));
}
log(`mlp step 784-512-512-10 batch ${BATCH}: ours ${oursStep.toFixed(1)} ms, tfjs ${tfStep?.toFixed(1) ?? 'n/a'} ms`);
const result = { adapter: gpu.info.description, runtime: gpu.info.runtime, matmul, mlp_step: { batch: BATCH, ours_ms: round(oursStep), tfjs_ms: round(tfStep) } };
if (json) console.log(JSON.stringify(result));
gpu.destroy();
