/**
 * Trains the MLP on the 8,000/2,000 MNIST split twice, ours and TF.js's
 * WebGPU backend, from the SAME initial weights, on the same batches in the
 * same order, with the same SGD-with-momentum hyperparameters, and prints one
 * JSON line with both test accuracies and step times. Deno:
 *   deno run -A bench/mlp-vs-tfjs.ts [--epochs 3] [--batch 64] [--lr 0.05] [--hidden 128] [--seed 1]
 */
import { acquireGpu } from '../src/gpu/device.ts';
import { createModel, createOptimizer, trainStep } from '../src/engine/index.ts';
import { batches } from '../src/data/batches.ts';
import { loadMnist } from '../src/data/mnist.node.ts';
import { createTfMlp, inOut, loadTfWebgpu } from './tfjs-mlp.ts';
import { opt } from './args.ts';

const epochs = Number(opt('epochs', '3'));
const batchSize = Number(opt('batch', '64'));
const lr = Number(opt('lr', '0.05'));
const momentum = 0.9;
const hidden = opt('hidden', '128').split(',').map(Number);
const seed = Number(opt('seed', '1'));

const { train, test } = await loadMnist();
const gpu = await acquireGpu();
const model = createModel(gpu, { kind: 'mlp', seed, hidden });
const widths = [784, ...hidden, 10];
const flat = await model.readParams();
const tensor = (name: string) => {
  const e = model.layout.find((l) => l.name === name)!;
  return flat.slice(e.offset, e.offset + e.length);
};
const init = widths
  .slice(1)
  .map((_, i) => ({ w: inOut(tensor(`dense${i}.weight`), widths[i + 1], widths[i]), b: tensor(`dense${i}.bias`) }));

const tf = await loadTfWebgpu();
if (!tf) throw new Error('TF.js WebGPU backend unavailable');
const theirs = createTfMlp(tf, widths, init, lr, momentum);
const optimizer = createOptimizer(model, { kind: 'sgd', lr, momentum });

let oursMs = 0;
let theirsMs = 0;
let steps = 0;
for (let epoch = 0; epoch < epochs; epoch++) {
  for (const b of batches(train, { batchSize, seed, epoch })) {
    let t0 = performance.now();
    await trainStep(model, optimizer, b.x, b.labels);
    oursMs += performance.now() - t0;
    t0 = performance.now();
    await theirs.step(b.x, b.labels);
    theirsMs += performance.now() - t0;
    steps++;
  }
}
const ours = await model.evaluate(test.images, test.labels);
const tfjs = await theirs.evaluate(test.images, test.labels);
const r = (v: number) => Math.round(v * 10000) / 10000;
console.log(
  JSON.stringify({
    adapter: gpu.info.description,
    runtime: gpu.info.runtime,
    model: `mlp ${widths.join('-')}`,
    epochs,
    batch: batchSize,
    lr,
    momentum,
    seed,
    steps,
    ours: { test_accuracy: r(ours.accuracy), test_loss: r(ours.loss), ms_per_step: r(oursMs / steps) },
    tfjs: { test_accuracy: r(tfjs.accuracy), test_loss: r(tfjs.loss), ms_per_step: r(theirsMs / steps) },
  }),
);
theirs.dispose();
gpu.destroy();
