/**
 * Kernel benchmark: our WGSL matmul and MLP training step against TensorFlow.js's
 * WebGPU backend, on the same adapter, in the same run. Meant for Deno
 * (`npm run bench:kernels -- --json`); also runs under Node (`npx tsx bench/kernels.ts`),
 * where TF.js's WebGPU backend may be unavailable (its figures are then null).
 *
 * Prints one JSON line with --json:
 * {"adapter","runtime","fallback_adapter","matmul":[{"n","variant","ours_gflops","blocked_gflops","tiled_gflops","tfjs_gflops"}...],
 * "skipped":[{"n","why"}],"mlp_step":{"batch","ours_ms","ours_deferred_ms","waits_per_step","deferred_waits_per_step","tfjs_ms"}}
 * `variant` is the kernel the adapter's table chose (`ours_gflops`); on
 * hardware adapters both GPU kernels are timed at every size (`blocked_gflops`,
 * `tiled_gflops`: the 128×128 register-blocked one and the 64×64 one).
 * Sizes above 1024 are skipped on fallback (CPU) adapters, where one 4096
 * matmul takes minutes; `skipped` says so.
 * Options: --sizes 256,512,1024,2048,4096  --reps N  --steps N  --rounds N  --no-tfjs  --group-rows 4,8 (hardware
 * adapters: the blocked kernel's banded tile order too)
 *
 * Each figure is the best of --rounds timings (default 4), ours and TF.js
 * alternating, so a burst of load from other processes hurts neither side alone.
 */
import { acquireGpu } from '../src/gpu/device.ts';
import { chooseMatmulVariant, planMatmul, type ChosenMatmulVariant } from '../src/gpu/kernels/matmul.ts';
import { DeferredScalars } from '../src/gpu/readback.ts';
import { createModel, createOptimizer, trainStep, trainStepDeferred } from '../src/engine/index.ts';
import { seededUniform } from '../src/engine/random.ts';
import { createTfMlp, inOut, loadTfWebgpu, type Tf } from './tfjs-mlp.ts';
import { args, opt } from './args.ts';

const json = args.includes('--json');
const sizes = opt('sizes', '256,512,1024,2048,4096').split(',').map(Number);
const withTf = !args.includes('--no-tfjs');
/** Largest matmul timed on a fallback adapter. */
const CPU_MAX_N = 1024;
/** Losses read every this many steps in the deferred MLP step, as trainLocal does. */
const READ_EVERY = 10;
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

const gpu = await acquireGpu();
const fallback = gpu.info.isFallbackAdapter;
log(`adapter: ${gpu.info.description} (${gpu.info.runtime}${fallback ? ', fallback' : ''})`);

/** Repetitions so one timing takes roughly a second on a software adapter (a fraction of one on a GPU), at least 2. */
function repsFor(n: number): number {
  const flops = fallback ? 2e9 : 4e12;
  // Capped: recording tens of thousands of dispatches would time the CPU, not the GPU.
  return Number(opt('reps', String(Math.min(5000, Math.max(2, Math.round(flops / (2 * n ** 3)))))));
}

async function oursMatmul(n: number, variant: ChosenMatmulVariant, groupRows = 0): Promise<number> {
  const a = gpu.upload(randomArray(n * n, 1));
  const b = gpu.upload(randomArray(n * n, 2));
  const c = gpu.storage(n * n);
  const d = planMatmul(gpu, a, b, c, { m: n, n, k: n, variant, groupRows });
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

/** Mean ms per MLP training step and GPU waits per step: awaiting every loss, or reading losses every READ_EVERY steps. */
async function oursMlpStep(deferred: boolean): Promise<{ ms: number; waits: number }> {
  const model = createModel(gpu, { kind: 'mlp', seed: 1, ...MLP });
  const optimizer = createOptimizer(model, { kind: 'sgd', lr: LR, momentum: MOMENTUM });
  const sink = new DeferredScalars(gpu, READ_EVERY);
  const x = randomArray(BATCH * 784, 3).map((v) => Math.abs(v));
  const y = Uint32Array.from({ length: BATCH }, (_, i) => i % 10);
  const step = async (i: number) => {
    if (!deferred) return void (await trainStep(model, optimizer, x, y));
    trainStepDeferred(model, optimizer, x, y, sink);
    if ((i + 1) % READ_EVERY === 0) await sink.collect();
  };
  for (let i = 0; i < READ_EVERY; i++) await step(i);
  const steps = Math.ceil(stepsToTime / READ_EVERY) * READ_EVERY;
  const waits0 = gpu.waits;
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) await step(i);
  const ms = (performance.now() - t0) / steps;
  const waits = (gpu.waits - waits0) / steps;
  sink.destroy();
  model.destroy();
  optimizer.destroy();
  return { ms, waits };
}

async function loadTf(): Promise<Tf | null> {
  if (!withTf) return null;
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
  const theirs = createTfMlp(
    tf,
    widths,
    widths
      .slice(1)
      .map((_, i) => ({ w: inOut(tensor(`dense${i}.weight`), widths[i + 1], widths[i]), b: tensor(`dense${i}.bias`) })),
    LR,
    MOMENTUM,
  );
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
/** `--group-rows 4,8,16`: on hardware adapters, also time the blocked kernel with its tiles walked in bands of that many tile rows. */
const groupRows = opt('group-rows', '')
  .split(',')
  .map(Number)
  .filter((g) => g > 0);
const matmul: {
  n: number;
  variant: ChosenMatmulVariant;
  ours_gflops: number | null;
  blocked_gflops: number | null;
  tiled_gflops: number | null;
  tfjs_gflops: number | null;
  blocked_grouped_gflops?: Record<string, number>;
}[] = [];
const skipped: { n: number; why: string }[] = [];
for (const n of sizes) {
  if (fallback && n > CPU_MAX_N) {
    skipped.push({ n, why: `fallback adapter: sizes above ${CPU_MAX_N} take minutes per timing on a CPU` });
    continue;
  }
  const variant = chooseMatmulVariant(gpu, { m: n, n, k: n });
  // On hardware adapters time both GPU kernels at every size, so the table's threshold can be read off.
  const timed: ChosenMatmulVariant[] = fallback ? [variant] : ['blocked', 'tiled'];
  const best: Partial<Record<ChosenMatmulVariant, number>> = {};
  const grouped: Record<string, number> = {};
  let theirs: number | null = tf ? 0 : null;
  for (let r = 0; r < rounds; r++) {
    for (const v of timed) best[v] = Math.max(best[v] ?? 0, await oursMatmul(n, v));
    if (!fallback)
      for (const g of groupRows) grouped[g] = Math.max(grouped[g] ?? 0, round(await oursMatmul(n, 'blocked', g))!);
    if (tf) theirs = Math.max(theirs ?? 0, await tfMatmul(tf, n));
  }
  const ours = best[variant] ?? 0;
  const other = (v: ChosenMatmulVariant) => (fallback ? null : round(best[v] ?? null));
  matmul.push({
    n,
    variant,
    ours_gflops: round(ours),
    blocked_gflops: other('blocked'),
    tiled_gflops: other('tiled'),
    tfjs_gflops: round(theirs),
    ...(groupRows.length > 0 && !fallback ? { blocked_grouped_gflops: grouped } : {}),
  });
  log(
    `matmul ${n}: ours (${variant}) ${ours.toFixed(2)} GFLOP/s, blocked ${best.blocked?.toFixed(2) ?? 'n/a'}, tiled ${best.tiled?.toFixed(2) ?? 'n/a'}, tfjs ${theirs?.toFixed(2) ?? 'n/a'} GFLOP/s`,
  );
}
let synced = { ms: Infinity, waits: 0 };
let deferred = { ms: Infinity, waits: 0 };
let tfStep: number | null = tf ? Infinity : null;
for (let r = 0; r < rounds; r++) {
  const s = await oursMlpStep(false);
  if (s.ms < synced.ms) synced = s;
  const d = await oursMlpStep(true);
  if (d.ms < deferred.ms) deferred = d;
  if (tf) tfStep = Math.min(tfStep ?? Infinity, await tfMlpStep(tf));
}
log(
  `mlp step 784-512-512-10 batch ${BATCH}: ours ${synced.ms.toFixed(3)} ms (loss read every step), ${deferred.ms.toFixed(3)} ms (every ${READ_EVERY}), tfjs ${tfStep?.toFixed(1) ?? 'n/a'} ms`,
);
const result = {
  adapter: gpu.info.description,
  runtime: gpu.info.runtime,
  fallback_adapter: fallback,
  matmul,
  skipped,
  mlp_step: {
    batch: BATCH,
    ours_ms: round(synced.ms),
    ours_deferred_ms: round(deferred.ms),
    read_every: READ_EVERY,
    waits_per_step: round(synced.waits),
    deferred_waits_per_step: round(deferred.waits),
    tfjs_ms: round(tfStep),
  },
};
if (json) console.log(JSON.stringify(result));
gpu.destroy();
