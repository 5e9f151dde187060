/**
 * Training steps of the built-in models on the graph engine (this tree's
 * src/) against the hand-wired MLP the graph engine replaced (kept as a
 * benchmark fixture in bench/fixtures/hand-mlp/) and, with --baseline DIR,
 * against the graph engine of another checkout (a detached worktree of an
 * older commit: before/after figures for the MLP, CNN and transformer).
 *
 * Everything runs in one process on one adapter. Each round times --steps
 * local training steps (the deferred step trainLocal runs: forward, backward
 * and the optimizer recorded, the loss read every 10 steps) of every engine,
 * the engines' order alternating from round to round. Figures: the median
 * steps/s over --rounds rounds after a warm-up and its spread (min, max);
 * the process's CPU time per step (user + system, all threads: the software
 * adapters run kernels on this process's threads, so it counts the work
 * done whatever else loads the machine); and the median of the per-round
 * ratios of each engine to the reference measured in the same round (the
 * hand-wired MLP where it runs, else the baseline): `ratios` of steps/s
 * (> 1: faster than the reference), `cpu_ratios` of CPU time (< 1: less
 * work). Per step it also counts dispatches, plan copies, queue submits and
 * CPU→GPU writes.
 *
 *   deno run -A bench/mlp-engines.ts [--cases mlp,mlp-wide,cnn,transformer] [--rounds 9] [--steps 20] [--baseline DIR]
 *   npx tsx bench/mlp-engines.ts --runtimes node,deno [same options]   (runs itself under each, one JSON line each)
 *
 * Prints one JSON line per runtime: {"runtime","adapter","rounds","steps","cases":[{"case","engines":
 *   {"<engine>":{"steps_per_s","min","max","cpu_ms_per_step","dispatches","copies","submits","writes"}},
 *   "ratios":{"<engine>/<reference>":median},"cpu_ratios":{…}}]}
 */
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { detectRuntime } from '../src/core/runtime.ts';
import { createModel } from '../src/engine/create.ts';
import type { Model, ModelSpec } from '../src/engine/model.ts';
import { createOptimizer, type OptimizerSpec } from '../src/engine/optimizer.ts';
import { trainStepDeferred } from '../src/engine/train-step.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import type { Gpu } from '../src/gpu/gpu.ts';
import { DeferredScalars } from '../src/gpu/readback.ts';
import { seededUniform } from '../src/nn/random.ts';
import { opt } from './args.ts';
import { runUnderEachRuntime } from './each-runtime.ts';
import { Mlp as HandMlp } from './fixtures/hand-mlp/mlp-hand.ts';
import { median } from '../src/core/stats.ts';

const READ_EVERY = 10;

if (runUnderEachRuntime('bench/mlp-engines.ts')) process.exit(0);

interface Case {
  name: string;
  spec: ModelSpec;
  optimizer: OptimizerSpec;
  batch: number;
  /** Inputs per sample, labels per sample, and the range of both (0: uniform floats). */
  inputSize: number;
  positions: number;
  classes: number;
  tokens: number;
}
const CASES: Record<string, Case> = {
  mlp: {
    name: 'mlp 784-128-10, batch 64 (the CLI default)',
    spec: { kind: 'mlp', seed: 1 },
    optimizer: { kind: 'sgd', lr: 0.01, momentum: 0.9 },
    batch: 64,
    inputSize: 784,
    positions: 1,
    classes: 10,
    tokens: 0,
  },
  'mlp-wide': {
    name: 'mlp 784-512-512-10, batch 128 (bench/gpu-step.ts)',
    spec: { kind: 'mlp', seed: 1, hidden: [512, 512] },
    optimizer: { kind: 'sgd', lr: 0.01, momentum: 0.9 },
    batch: 128,
    inputSize: 784,
    positions: 1,
    classes: 10,
    tokens: 0,
  },
  cnn: {
    name: 'cnn [8,16], batch 32',
    spec: { kind: 'cnn', seed: 1 },
    optimizer: { kind: 'adamw', lr: 2e-3 },
    batch: 32,
    inputSize: 784,
    positions: 1,
    classes: 10,
    tokens: 0,
  },
  transformer: {
    name: 'transformer (words workload), batch 32',
    spec: { kind: 'transformer', seed: 1 },
    optimizer: { kind: 'adamw', lr: 3e-3 },
    batch: 32,
    inputSize: 32,
    positions: 32,
    classes: 27,
    tokens: 27,
  },
};

type MakeModel = (gpu: Gpu, spec: ModelSpec) => Model;
interface Engine {
  name: string;
  gpu: Gpu;
  make: MakeModel;
  handles: (c: Case) => boolean;
}

const gpu = await acquireGpu();
const engines: Engine[] = [
  { name: 'graph', gpu, make: createModel, handles: () => true },
  {
    name: 'hand',
    gpu,
    make: (g, s) => new HandMlp(g, s as Extract<ModelSpec, { kind: 'mlp' }>),
    handles: (c) => c.spec.kind === 'mlp',
  },
];
const baseline = opt('baseline', '');
if (baseline) {
  // Another checkout's engine, on its own device (its own shaders and pipeline cache) from the same adapter.
  const from = (path: string) => import(pathToFileURL(`${baseline.replace(/\/$/, '')}/${path}`).href);
  const [{ acquireGpu: acquireOther }, { createModel: createOther }] = await Promise.all([
    from('src/gpu/device.ts'),
    from('src/engine/create.ts'),
  ]);
  engines.push({ name: 'baseline', gpu: await acquireOther(), make: createOther, handles: () => true });
}

/** Counts what a step asks of the device: wraps the Gpu's record/copy and the queue's submit/writeBuffer (bench only). */
function counters(g: Gpu): { dispatches: number; copies: number; submits: number; writes: number } {
  const c = { dispatches: 0, copies: 0, submits: 0, writes: 0 };
  const record = g.record.bind(g);
  g.record = (d) => {
    c.dispatches += Array.isArray(d) ? d.length : 1;
    record(d);
  };
  const copy = g.copy.bind(g);
  g.copy = (...a) => {
    c.copies++;
    copy(...a);
  };
  const queue = g.device.queue;
  const submit = queue.submit.bind(queue);
  queue.submit = (b) => {
    c.submits++;
    submit(b);
  };
  const writeBuffer = queue.writeBuffer.bind(queue) as (...a: unknown[]) => void;
  (queue as unknown as { writeBuffer: (...a: unknown[]) => void }).writeBuffer = (...a) => {
    c.writes++;
    writeBuffer(...a);
  };
  return c;
}
const countOf = new Map([...new Set(engines.map((e) => e.gpu))].map((g) => [g, counters(g)]));
const count = (e: Engine) => countOf.get(e.gpu)!;

const rounds = Number(opt('rounds', '9'));
const steps = Number(opt('steps', '20'));
const round3 = (v: number) => Math.round(v * 1000) / 1000;

const out: Record<string, unknown>[] = [];
for (const key of opt('cases', 'mlp,mlp-wide').split(',')) {
  const c = CASES[key];
  if (!c) throw new Error(`unknown case ${key}; cases: ${Object.keys(CASES).join(', ')}`);
  const u = seededUniform(7);
  const draw = () => (c.tokens ? Math.floor(u() * c.tokens) : u());
  const x = Float32Array.from({ length: c.batch * c.inputSize }, draw);
  const y = Uint32Array.from({ length: c.batch * c.positions }, () => Math.floor(u() * c.classes));
  const runs = engines
    .filter((e) => e.handles(c))
    .map((e) => {
      const model = e.make(e.gpu, c.spec);
      return {
        e,
        model,
        optimizer: createOptimizer(model, c.optimizer),
        sink: new DeferredScalars(e.gpu, READ_EVERY),
        rates: [] as number[],
        cpuMs: [] as number[],
        perStep: {} as Record<string, number>,
      };
    });
  type Run = (typeof runs)[number];
  async function time(r: Run, n: number): Promise<number> {
    const before = { ...count(r.e) };
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let s = 0; s < n; s++) {
      trainStepDeferred(r.model, r.optimizer, x, y, r.sink);
      if ((s + 1) % READ_EVERY === 0 || s + 1 === n) await r.sink.collect();
    }
    const rate = n / ((performance.now() - t0) / 1000);
    const cpu = process.cpuUsage(cpu0);
    r.cpuMs.push((cpu.user + cpu.system) / 1000 / n);
    const after = count(r.e);
    for (const k of Object.keys(before) as (keyof typeof before)[]) r.perStep[k] = round3((after[k] - before[k]) / n);
    return rate;
  }
  for (const r of runs) await time(r, Math.min(steps, 2 * READ_EVERY)); // compile and warm up
  for (const r of runs) r.cpuMs.length = 0;
  // Ratios are taken against the hand-wired MLP where it runs, else against the baseline checkout.
  const ref = runs.find((r) => r.e.name === 'hand') ?? runs.find((r) => r.e.name === 'baseline') ?? runs[0];
  const ratios: Record<string, number[]> = {};
  const cpuRatios: Record<string, number[]> = {};
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? runs : [...runs].reverse();
    for (const r of order) r.rates.push(await time(r, steps));
    for (const r of runs.filter((r) => r !== ref)) {
      (ratios[`${r.e.name}/${ref.e.name}`] ??= []).push(r.rates[i] / ref.rates[i]);
      (cpuRatios[`${r.e.name}/${ref.e.name}`] ??= []).push(r.cpuMs[i] / ref.cpuMs[i]);
    }
  }
  out.push({
    case: c.name,
    engines: Object.fromEntries(
      runs.map((r) => [
        r.e.name,
        {
          steps_per_s: round3(median(r.rates)),
          min: round3(Math.min(...r.rates)),
          max: round3(Math.max(...r.rates)),
          cpu_ms_per_step: round3(median(r.cpuMs)),
          ...r.perStep,
        },
      ]),
    ),
    ratios: Object.fromEntries(Object.entries(ratios).map(([k, v]) => [k, round3(median(v))])),
    cpu_ratios: Object.fromEntries(Object.entries(cpuRatios).map(([k, v]) => [k, round3(median(v))])),
  });
  for (const r of runs) {
    r.sink.destroy();
    r.optimizer.destroy();
    r.model.destroy();
  }
}
console.log(
  JSON.stringify({
    runtime: detectRuntime(),
    adapter: gpu.info.description,
    rounds,
    steps,
    read_every: READ_EVERY,
    cases: out,
  }),
);
for (const e of engines) if (e.gpu !== gpu) e.gpu.destroy();
gpu.destroy();
