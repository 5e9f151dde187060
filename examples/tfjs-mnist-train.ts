/**
 * The TF.js MNIST example's training, the part that runs anywhere TF.js runs:
 * examples/tfjs-mnist.ts calls it under Node and Deno, and the page calls it
 * when a tab joins a TF.js job (demo/src/tfjs-join.ts). Every rank runs this
 * same function, so every rank builds the same model and takes the same steps.
 * Everything ringtrain-specific is marked `// ringtrain`.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import * as hvd from 'ringtrain/tfjs'; // ringtrain
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import type { MnistSplit } from '../src/data/mnist.ts';

/** A job whose config names this model is a job of this example: the page joins it with this code. */
export const TFJS_MNIST_MODEL = 'tfjs-mnist';

export interface MnistRecipe {
  epochs: number;
  /** Examples per step on each rank. */
  batch: number;
  /** The learning rate of one rank alone; the ring uses lr × size after a warm-up. */
  lr: number;
  /** Epochs of the warm-up from lr to lr × size. */
  warmupEpochs: number;
  /** Train on the first this many training digits (all 8,000 when 0): short runs for tests. */
  trainExamples: number;
  /** Evaluate on the first this many test digits (all 2,000 when 0). */
  testExamples: number;
  /** TF.js's backend: its CPU one, or WebGPU. */
  backend: 'cpu' | 'webgpu';
}

export const DEFAULT_RECIPE: MnistRecipe = { epochs: 3, batch: 32, lr: 0.02, warmupEpochs: 1, trainExamples: 0, testExamples: 0, backend: 'cpu' };

const FLAGS: Record<string, Exclude<keyof MnistRecipe, 'backend'>> = {
  '--epochs': 'epochs',
  '--batch': 'batch',
  '--lr': 'lr',
  '--warmup-epochs': 'warmupEpochs',
  '--train-examples': 'trainExamples',
  '--test-examples': 'testExamples',
};

/** Reads `--epochs 3 --batch 32 …` (argv, or a job's `args` hyperparameter); unknown flags and bad numbers are refused. */
export function parseRecipe(args: readonly string[]): MnistRecipe {
  const recipe = { ...DEFAULT_RECIPE };
  for (let i = 0; i < args.length; i += 2) {
    const [flag, value] = [args[i], args[i + 1]];
    if (flag === '--backend') {
      if (value !== 'cpu' && value !== 'webgpu') throw new RingtrainError(ErrorCode.InvalidArgument, `tfjs-mnist: --backend is cpu or webgpu, got ${JSON.stringify(value)}`);
      recipe.backend = value;
      continue;
    }
    const key = FLAGS[flag];
    if (!key) throw new RingtrainError(ErrorCode.InvalidArgument, `tfjs-mnist: unknown option ${JSON.stringify(flag)}; the options are ${[...Object.keys(FLAGS), '--backend'].join(', ')}`);
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n < 0) throw new RingtrainError(ErrorCode.InvalidArgument, `tfjs-mnist: ${flag} needs a number ≥ 0, got ${JSON.stringify(value)}`);
    recipe[key] = n;
  }
  if (!Number.isInteger(recipe.batch) || recipe.batch < 1) throw new RingtrainError(ErrorCode.InvalidArgument, `tfjs-mnist: --batch must be a whole number ≥ 1, got ${recipe.batch}`);
  return recipe;
}

/** The conv net: two 3×3 conv + max-pool blocks and two dense layers. */
export function buildModel(): tfl.Sequential {
  return tfl.sequential({
    layers: [
      tfl.layers.conv2d({ inputShape: [28, 28, 1], filters: 8, kernelSize: 3, padding: 'same', activation: 'relu' }),
      tfl.layers.maxPooling2d({ poolSize: 2 }),
      tfl.layers.conv2d({ filters: 16, kernelSize: 3, padding: 'same', activation: 'relu' }),
      tfl.layers.maxPooling2d({ poolSize: 2 }),
      tfl.layers.flatten(),
      tfl.layers.dense({ units: 64, activation: 'relu' }),
      tfl.layers.dense({ units: 10, activation: 'softmax' }),
    ],
  });
}

function toTensors(s: { images: Float32Array; labels: ArrayLike<number> }, limit: number): { x: tf.Tensor4D; y: tf.Tensor2D } {
  const n = limit > 0 ? Math.min(limit, s.labels.length) : s.labels.length;
  return tf.tidy(() => ({
    x: tf.tensor4d(s.images.subarray(0, n * 784), [n, 28, 28, 1]),
    y: tf.oneHot(tf.tensor1d(Array.from(s.labels).slice(0, n), 'int32'), 10) as tf.Tensor2D,
  }));
}

export interface TrainResult {
  size: number;
  epochs: number;
  batchPerRank: number;
  steps: number;
  testAccuracy: number;
}

/**
 * Trains on this rank's share of `data` and returns the test accuracy (every
 * rank ends with the same weights, so every rank finds the same figure).
 * `session` is init()'s; `log` gets one line per epoch.
 */
export async function trainMnist(session: hvd.Session, data: MnistSplit, recipe: MnistRecipe, log: (line: string) => void = () => undefined): Promise<TrainResult> {
  const train = toTensors(data.train, recipe.trainExamples);
  const test = toTensors(data.test, recipe.testExamples);
  const [x, y] = hvd.shardTensors([train.x, train.y]); // ringtrain: this rank's share
  const model = buildModel();
  model.compile({
    // ringtrain: wrap the optimizer; the learning rate grows with the ring (warmed up below)
    optimizer: new hvd.DistributedOptimizer(tf.train.momentum(recipe.lr * session.size, 0.9)),
    loss: 'categoricalCrossentropy',
    metrics: ['accuracy'],
  });
  let lastTest = NaN;
  const evaluate = async (): Promise<{ accuracy: number; loss: number }> => {
    const [loss, accuracy] = await Promise.all((model.evaluate(test.x, test.y, { batchSize: 500 }) as tf.Scalar[]).map(async (t) => (await t.data())[0]));
    lastTest = accuracy;
    return { accuracy, loss };
  };
  let steps = 0;
  await model.fit(x, y, {
    epochs: recipe.epochs,
    batchSize: recipe.batch,
    verbose: 0,
    callbacks: [
      new hvd.BroadcastGlobalVariablesCallback(0), // ringtrain: start from rank 0's weights
      new hvd.MetricAverageCallback(), // ringtrain: logs averaged over the ring
      new hvd.LearningRateWarmupCallback({ baseLr: recipe.lr, warmupEpochs: recipe.warmupEpochs }), // ringtrain
      new hvd.TrainEventsCallback({ evaluate }), // ringtrain: steps and test accuracy as ringtrain events (the page draws them)
      new tfl.CustomCallback({
        onBatchEnd: () => void steps++,
        onEpochEnd: (e, l) => log(`epoch ${e + 1}/${recipe.epochs}: loss ${l?.loss?.toFixed(4)} accuracy ${l?.acc?.toFixed(4)} test accuracy ${lastTest.toFixed(4)}`),
      }),
      new hvd.StopTogetherCallback(), // ringtrain: if one rank stops, all do
    ],
  });
  const { accuracy } = await evaluate();
  tf.dispose([train.x, train.y, test.x, test.y, x, y]);
  model.dispose();
  return { size: session.size, epochs: recipe.epochs, batchPerRank: recipe.batch, steps, testAccuracy: accuracy };
}
