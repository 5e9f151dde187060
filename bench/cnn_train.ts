/**
 * Trains the CNN on the 8,000 MNIST training digits and reports test accuracy
 * on the 2,000 test digits after every epoch, with seconds per epoch. One JSON
 * line per epoch, then a summary line. Runs under Deno (lavapipe) and Node
 * (SwiftShader):
 *
 *   deno run -A bench/cnn_train.ts --epochs 5 --batch 32 --optimizer sgd --lr 0.05
 *   npx tsx bench/cnn_train.ts --epochs 1 --channels 8,16
 *
 * The step also reads the loss back (as a trainer does), so the figures are
 * those of real training, not of queued GPU work.
 */
import { Command } from 'commander';
import { detectRuntime } from '../src/core/runtime.ts';
import { batches } from '../src/data/batches.ts';
import { loadMnist } from '../src/data/mnist.node.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { Cnn } from '../src/engine/cnn.ts';
import { createOptimizer } from '../src/engine/optimizer.ts';
import { args } from './args.ts';

const opts = new Command()
  .option('--epochs <n>', 'epochs', '5')
  .option('--batch <n>', 'batch size', '32')
  .option('--optimizer <kind>', 'sgd or adamw', 'sgd')
  .option('--lr <x>', 'learning rate', '0.05')
  .option('--momentum <x>', 'SGD momentum', '0.9')
  .option('--channels <c1,c2>', 'conv output channels', '8,16')
  .option('--hidden <n>', 'hidden dense width (0: none)', '0')
  .option('--seed <n>', 'seed for init and data order', '1')
  .option('--steps <n>', 'stop each epoch after this many steps (timing runs)', '0')
  .parse(args, { from: 'user' })
  .opts();

const epochs = Number(opts.epochs);
const batch = Number(opts.batch);
const lr = Number(opts.lr);
const seed = Number(opts.seed);
const channels = String(opts.channels).split(',').map(Number) as [number, number];
const { train, test } = await loadMnist();
const gpu = await acquireGpu();
const model = new Cnn(gpu, { channels, hidden: Number(opts.hidden), seed });
const optimizer = createOptimizer(model, {
  kind: opts.optimizer as 'sgd' | 'adamw',
  lr,
  momentum: Number(opts.momentum),
});
const maxSteps = Number(opts.steps);

let total = 0;
let best = 0;
for (let epoch = 0; epoch < epochs; epoch++) {
  const t0 = performance.now();
  let steps = 0;
  let lossSum = 0;
  for (const b of batches(train, { batchSize: batch, seed, epoch })) {
    lossSum += await model.forwardBackward(b.x, b.labels);
    optimizer.step();
    steps++;
    if (maxSteps > 0 && steps >= maxSteps) break;
  }
  await gpu.sync();
  const seconds = (performance.now() - t0) / 1000;
  total += seconds;
  const evaluation = await model.evaluate(test.images, test.labels);
  best = Math.max(best, evaluation.accuracy);
  console.log(
    JSON.stringify({
      epoch: epoch + 1,
      steps,
      train_loss: lossSum / steps,
      test_accuracy: evaluation.accuracy,
      test_loss: evaluation.loss,
      epoch_s: seconds,
      samples_per_s: (steps * batch) / seconds,
    }),
  );
}
console.log(
  JSON.stringify({
    summary: true,
    runtime: detectRuntime(),
    adapter: gpu.info.description,
    model: { channels, hidden: Number(opts.hidden), params: model.paramCount },
    optimizer: opts.optimizer,
    lr,
    batch,
    epochs,
    mean_epoch_s: total / epochs,
    best_test_accuracy: best,
  }),
);
model.destroy();
gpu.destroy();
