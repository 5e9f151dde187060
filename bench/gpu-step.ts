/**
 * Training-step benchmark on whatever adapter this runtime gets, for the
 * workloads /work/shared/gpu/torch_ref.py times in PyTorch: the CNN ([8,16]
 * channels, AdamW 2e-3) at each --batches size and the 784-512-512-10 MLP
 * (SGD, momentum 0.9) at --mlp-batch, over one epoch of --samples random
 * 28×28 images; samples/s, ms per step and GPU→CPU waits per step, each timed
 * two ways: the loss awaited every step (what trainers did before latency
 * hiding) and read every --read-every steps (what trainLocal does now).
 *
 *   node --import tsx bench/gpu-step.ts --batches 32,256 --mlp-batch 128 --samples 8000 --rounds 3
 *   deno run -A bench/gpu-step.ts --batches 32 --mlp-batch 0 --samples 960
 *
 * Prints one JSON line: {"adapter","runtime","fallback_adapter","read_every","samples",
 *   "steps":[{"model","batch","steps","synced_samples_per_s","deferred_samples_per_s",
 *             "synced_ms_per_step","deferred_ms_per_step","synced_waits_per_step","deferred_waits_per_step"}]}
 * Each figure is the best of --rounds epochs after one warm-up epoch.
 * bench/step-runtimes.ts runs this under Node and Deno in one go.
 */
import { detectRuntime } from '../src/core/runtime.ts';
import { Cnn } from '../src/engine/cnn.ts';
import { createModel } from '../src/engine/create.ts';
import type { Model } from '../src/engine/model.ts';
import { createOptimizer, type Optimizer } from '../src/engine/optimizer.ts';
import { seededUniform } from '../src/engine/random.ts';
import { trainStepDeferred } from '../src/engine/train-step.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { DeferredScalars } from '../src/gpu/readback.ts';
import { opt } from './args.ts';

const batchSizes = opt('batches', '32,256')
  .split(',')
  .map(Number)
  .filter((b) => b > 0);
const mlpBatch = Number(opt('mlp-batch', '128'));
const samples = Number(opt('samples', '8000'));
const rounds = Number(opt('rounds', '3'));
const readEvery = Number(opt('read-every', '10'));

const gpu = await acquireGpu();
const u = seededUniform(7);
const images = Float32Array.from({ length: samples * 784 }, () => u());
const labels = Uint32Array.from({ length: samples }, () => Math.floor(u() * 10));

interface EpochFigures {
  samplesPerS: number;
  waitsPerStep: number;
}

async function epoch(
  model: Model,
  optimizer: Optimizer,
  sink: DeferredScalars,
  batch: number,
  deferred: boolean,
): Promise<EpochFigures> {
  const steps = Math.floor(samples / batch);
  const waits0 = gpu.waits;
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) {
    const x = images.subarray(s * batch * 784, (s + 1) * batch * 784);
    const y = labels.subarray(s * batch, (s + 1) * batch);
    if (deferred) {
      trainStepDeferred(model, optimizer, x, y, sink);
      if ((s + 1) % readEvery === 0 || s + 1 === steps) await sink.collect();
    } else {
      await model.forwardBackward(x, y);
      optimizer.step();
    }
  }
  await sink.collect();
  const seconds = (performance.now() - t0) / 1000;
  return { samplesPerS: (steps * batch) / seconds, waitsPerStep: (gpu.waits - waits0) / steps };
}

const results: Record<string, number | string>[] = [];
async function measure(name: string, batch: number, make: () => { model: Model; optimizer: Optimizer }): Promise<void> {
  const { model, optimizer } = make();
  const sink = new DeferredScalars(gpu, readEvery);
  await epoch(model, optimizer, sink, batch, true); // compile and warm up
  let synced: EpochFigures = { samplesPerS: 0, waitsPerStep: 0 };
  let deferred: EpochFigures = { samplesPerS: 0, waitsPerStep: 0 };
  for (let r = 0; r < rounds; r++) {
    const s = await epoch(model, optimizer, sink, batch, false);
    if (s.samplesPerS > synced.samplesPerS) synced = s;
    const d = await epoch(model, optimizer, sink, batch, true);
    if (d.samplesPerS > deferred.samplesPerS) deferred = d;
  }
  const ms = (f: EpochFigures) => Math.round((batch / f.samplesPerS) * 1e6) / 1000;
  results.push({
    model: name,
    batch,
    steps: Math.floor(samples / batch),
    synced_samples_per_s: Math.round(synced.samplesPerS),
    deferred_samples_per_s: Math.round(deferred.samplesPerS),
    synced_ms_per_step: ms(synced),
    deferred_ms_per_step: ms(deferred),
    synced_waits_per_step: Math.round(synced.waitsPerStep * 1000) / 1000,
    deferred_waits_per_step: Math.round(deferred.waitsPerStep * 1000) / 1000,
  });
  sink.destroy();
  optimizer.destroy();
  model.destroy();
}

for (const batch of batchSizes) {
  await measure('cnn', batch, () => {
    const model = new Cnn(gpu, { seed: 1 });
    return { model, optimizer: createOptimizer(model, { kind: 'adamw', lr: 2e-3 }) };
  });
}
if (mlpBatch > 0) {
  await measure('mlp', mlpBatch, () => {
    const model = createModel(gpu, { kind: 'mlp', seed: 1, inputSize: 784, hidden: [512, 512], classes: 10 });
    return { model, optimizer: createOptimizer(model, { kind: 'sgd', lr: 0.01, momentum: 0.9 }) };
  });
}
console.log(
  JSON.stringify({
    adapter: gpu.info.description,
    runtime: detectRuntime(),
    fallback_adapter: gpu.info.isFallbackAdapter,
    read_every: readEvery,
    samples,
    steps: results,
  }),
);
gpu.destroy();
