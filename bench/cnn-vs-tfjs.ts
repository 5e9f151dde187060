/**
 * Trains the CNN on the 8,000/2,000 MNIST split twice, ours and the same
 * network in TF.js ops on TF.js's WebGPU backend (bench/tfjs-cnn.ts), from
 * the SAME initial weights, on the same batches in the same order, with the
 * same SGD-with-momentum hyperparameters and the same loss (mean softmax
 * cross-entropy over the batch). Test accuracy after every epoch.
 *
 * Before training goes on, the first step is a check that both are the same
 * model: after one step from equal weights on one batch, the weights (and the
 * updates, lr·gradient, a stricter test) must agree; the largest relative
 * difference per tensor (max|ours − tfjs| / max|ours|) goes into the JSON.
 * `--epochs 0` runs that one step alone. Deno:
 *
 *   deno run -A bench/cnn-vs-tfjs.ts [--epochs 5] [--batch 32] [--lr 0.05] [--momentum 0.9] [--channels 8,16]
 *
 * One JSON line per epoch on stderr (progress), one result line on stdout.
 */
import { Command } from 'commander';
import { batches } from '../src/data/batches.ts';
import { loadMnist } from '../src/data/mnist.node.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { Cnn } from '../src/engine/cnn.ts';
import type { Model } from '../src/engine/model.ts';
import { createOptimizer } from '../src/engine/optimizer.ts';
import { createTfCnn } from './tfjs-cnn.ts';
import { loadTfWebgpu } from './tfjs-mlp.ts';
import { args } from './args.ts';

const opts = new Command()
  .option('--epochs <n>', 'epochs (0: only the one-step check)', '5')
  .option('--batch <n>', 'batch size', '32')
  .option('--lr <x>', 'learning rate', '0.05')
  .option('--momentum <x>', 'SGD momentum', '0.9')
  .option('--channels <c1,c2>', 'conv output channels', '8,16')
  .option('--hidden <n>', 'hidden dense width (0: none)', '0')
  .option('--seed <n>', 'seed for init and data order', '1')
  .parse(args, { from: 'user' })
  .opts();
const epochs = Number(opts.epochs);
const batchSize = Number(opts.batch);
const lr = Number(opts.lr);
const momentum = Number(opts.momentum);
const seed = Number(opts.seed);
const hidden = Number(opts.hidden);
const channels = String(opts.channels).split(',').map(Number) as [number, number];

/** Our flat parameter buffer as named tensors. */
function named(model: Model, flat: Float32Array): Record<string, Float32Array> {
  return Object.fromEntries(model.layout.map((e) => [e.name, flat.slice(e.offset, e.offset + e.length)]));
}

/** Largest over tensors of max|a − b| / max|b|: b is ours, the reference scale. */
function maxRelDiff(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  let worst = 0;
  for (const [name, ref] of Object.entries(b)) {
    const other = a[name];
    if (!other || other.length !== ref.length)
      throw new Error(`tensor ${name}: tfjs has ${other?.length} values, ours ${ref.length}`);
    let diff = 0;
    let scale = 0;
    for (let i = 0; i < ref.length; i++) {
      diff = Math.max(diff, Math.abs(other[i] - ref[i]));
      scale = Math.max(scale, Math.abs(ref[i]));
    }
    worst = Math.max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

const minus = (a: Record<string, Float32Array>, b: Record<string, Float32Array>) =>
  Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v.map((x, i) => x - b[k][i])]));

const { train, test } = await loadMnist();
const gpu = await acquireGpu();
const model = new Cnn(gpu, { channels, hidden, seed });
const optimizer = createOptimizer(model, { kind: 'sgd', lr, momentum });
const init = named(model, await model.readParams());

const tf = await loadTfWebgpu();
if (!tf) throw new Error('TF.js WebGPU backend unavailable (needs navigator.gpu: run under Deno)');
const theirs = createTfCnn(tf, { tensors: init, channels, hidden, classes: model.classes }, lr, momentum);

// The same-model check: one step from equal weights on the first batch.
const first = batches(train, { batchSize, seed, epoch: 0 }).next().value!;
const oursFirstLoss = await model.forwardBackward(first.x, first.labels);
optimizer.step();
const tfFirstLoss = await theirs.step(first.x, first.labels);
const oursAfter = named(model, await model.readParams());
const tfAfter = await theirs.readTensors();
const check = {
  first_step_max_rel_diff: maxRelDiff(tfAfter, oursAfter),
  first_step_update_max_rel_diff: maxRelDiff(minus(tfAfter, init), minus(oursAfter, init)),
  first_step_loss: { ours: oursFirstLoss, tfjs: tfFirstLoss },
};
console.error(JSON.stringify(check));

const r = (v: number) => Math.round(v * 1e4) / 1e4;
const side = () => ({ test_accuracy_per_epoch: [] as number[], train_loss_per_epoch: [] as number[], ms: 0 });
const ours = side();
const tfjs = side();
let steps = 0;
for (let epoch = 0; epoch < epochs; epoch++) {
  let oursLoss = 0;
  let tfLoss = 0;
  let count = 0;
  // Epoch 0's first batch was the check step: it counts as this epoch's first step for both.
  const start = epoch === 0 ? 1 : 0;
  if (epoch === 0) {
    oursLoss += oursFirstLoss;
    tfLoss += tfFirstLoss;
    count++;
  }
  for (const b of batches(train, { batchSize, seed, epoch, startBatch: start })) {
    let t0 = performance.now();
    oursLoss += await model.forwardBackward(b.x, b.labels);
    optimizer.step();
    ours.ms += performance.now() - t0;
    t0 = performance.now();
    tfLoss += await theirs.step(b.x, b.labels);
    tfjs.ms += performance.now() - t0;
    count++;
    steps++;
  }
  const a = await model.evaluate(test.images, test.labels);
  const b = await theirs.evaluate(test.images, test.labels);
  ours.test_accuracy_per_epoch.push(r(a.accuracy));
  tfjs.test_accuracy_per_epoch.push(r(b.accuracy));
  ours.train_loss_per_epoch.push(r(oursLoss / count));
  tfjs.train_loss_per_epoch.push(r(tfLoss / count));
  console.error(JSON.stringify({ epoch: epoch + 1, ours: a, tfjs: b }));
}

const summary = (s: ReturnType<typeof side>) => ({
  test_accuracy_per_epoch: s.test_accuracy_per_epoch,
  train_loss_per_epoch: s.train_loss_per_epoch,
  ms_per_step: steps > 0 ? r(s.ms / steps) : null,
});
console.log(
  JSON.stringify({
    model: 'cnn',
    adapter: gpu.info.description,
    runtime: gpu.info.runtime,
    channels,
    hidden,
    params: model.paramCount,
    epochs,
    batch: batchSize,
    lr,
    momentum,
    seed,
    ...check,
    ours: summary(ours),
    tfjs: summary(tfjs),
  }),
);
theirs.dispose();
model.destroy();
gpu.destroy();
