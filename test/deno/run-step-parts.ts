/**
 * A step submitted in parts under Deno, for test/deno/step-parts.test.ts. The same small transformer
 * trains on a Gpu that submits at once and on one that cuts it into parts of about a
 * dozen dispatches, each waited for alone (`stepParts`: a real option, the default's sizes made tiny); a bucketed step (its read-backs start
 * mid-step) runs on both too. Prints one JSON line: both runs' losses and bucket gradients as bits,
 * the parts run's submit counts, and what a setTimeout(0) scheduled before a step saw when it ran;
 * and whether createModelInPieces (a worker's) gives createModel's weights bit for bit.
 */
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';
import { createModel, createModelInPieces, createOptimizer, trainStep } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import type { Model } from '../../src/engine/model.ts';

const context = 16;
const vocab = 40;
const batch = 2;
const u = seededUniform(9);
const ids = Float32Array.from({ length: batch * context }, () => Math.floor(u() * vocab));
const targets = Array.from(ids, (t) => (t * 7 + 3) % vocab);

const transformer = (gpu: Gpu): Model =>
  createModel(gpu, 'transformer', { vocab, context, layers: 2, width: 32, heads: 4, seed: 4 });

const bits = (values: ArrayLike<number>): number[] => Array.from(new Uint32Array(Float32Array.from(values).buffer));

interface Run {
  losses: number[];
  buckets: number[];
  /** `gpu.submits` seen by a timer scheduled just before the step, and after the step resolved. */
  timerSaw: number[];
  after: number[];
  /** An evaluation in several chunks: its metrics as bits, and `gpu.submits` before it, seen by a timer scheduled before it, after it. */
  evaluation: number[];
  evaluationSubmits: { before: number; timerSaw: number; after: number };
}

async function train(gpu: Gpu): Promise<Run> {
  const model = transformer(gpu);
  const optimizer = createOptimizer(model, { kind: 'adamw', lr: 0.01, weightDecay: 0.01 });
  const run: Run = {
    losses: [],
    buckets: [],
    timerSaw: [],
    after: [],
    evaluation: [],
    evaluationSubmits: { before: 0, timerSaw: -1, after: 0 },
  };
  for (let step = 0; step < 2; step++) {
    let saw = -1;
    setTimeout(() => (saw = gpu.submits), 0);
    run.losses.push(await trainStep(model, optimizer, ids, targets));
    run.timerSaw.push(saw);
    run.after.push(gpu.submits);
  }
  // A bucketed step: every bucket's read-back starts as backward finishes it, as a ring's step does.
  const sink = new DeferredScalars(gpu);
  const buckets = model.forwardBackwardBuckets!(ids, targets, batch, sink, 4096);
  for (const b of buckets) run.buckets.push(...bits(await b.ready));
  run.losses.push(...(await sink.collect()));
  sink.destroy();
  // An evaluation of one sample a chunk: a chunk's inputs are written after the chunks before it were submitted.
  const before = gpu.submits;
  setTimeout(() => (run.evaluationSubmits.timerSaw = gpu.submits), 0);
  const metrics = await model.evaluate(ids, targets, 1);
  run.evaluation = bits([metrics.loss, metrics.accuracy]);
  run.evaluationSubmits = { ...run.evaluationSubmits, before, after: gpu.submits };
  optimizer.destroy();
  model.destroy();
  return { ...run, losses: bits(run.losses) };
}

/** Whether a model made as a worker makes it (its weights drawn with the loop turning) holds the constructor's weights, bit for bit. */
async function sameInitialWeights(gpu: Gpu): Promise<boolean> {
  const spec = {
    kind: 'transformer',
    vocab: 2000,
    context,
    layers: 1,
    width: 48,
    heads: 4,
    arch: 'gpt2',
    seed: 6,
  } as const;
  const [made, inPieces] = [createModel(gpu, spec), await createModelInPieces(gpu, spec)];
  const [a, b] = [bits(await made.readParams()), bits(await inPieces.readParams())];
  made.destroy();
  inPieces.destroy();
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

const whole = await acquireGpu({ stepParts: false });
const oneSubmit = await train(whole);
const initialWeightsAlike = await sameInitialWeights(whole);
whole.destroy();
const split = await acquireGpu({ stepParts: { partMs: 0, chunkBytes: 1024 * 1024 } });
const parts = await train(split);
split.destroy();
console.log(JSON.stringify({ oneSubmit, parts, initialWeightsAlike }));
