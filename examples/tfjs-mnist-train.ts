/**
 * The TF.js MNIST example's training, the part that runs anywhere TF.js runs:
 * examples/tfjs-mnist.ts calls it under Node and Deno, and the page calls it
 * when a tab joins a TF.js job (demo/src/tfjs-join.ts). Every rank runs this
 * same function, so every rank builds the same model and takes the same steps.
 * Everything ringtrain-specific is marked `// ringtrain`.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { ErrorCode, RingtrainError, type data as ringtrainData } from 'ringtrain';
import * as hvd from 'ringtrain/tfjs'; // ringtrain

/** Collectives wait this long for the slowest rank (ms); the same as the peer timeout the example gives init(). */
export const RING_TIMEOUT_MS = 120_000;

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
  /** The wrapped optimizer: Adam, or SGD with momentum 0.9. */
  optimizer: 'adam' | 'momentum';
  /** After the warm-up: anneal the rate to zero by the last step (cosine), or keep it. */
  decay: 'cosine' | 'constant';
  /** The network: the conv net (buildModel), or a small one for quick runs on TF.js's CPU backend (tests). */
  model: 'cnn' | 'small';
}

/**
 * The defaults, for 4 workers (README has what they reached). Adam rather
 * than SGD with momentum: at 4 × 32 a step, 8,000 digits are only 63 steps an
 * epoch, and momentum SGD stalled near 94.6% at the highest rate that did not
 * diverge; cosine decay lets the last epochs settle.
 */
export const DEFAULT_RECIPE: MnistRecipe = {
  epochs: 8,
  batch: 32,
  lr: 0.001,
  warmupEpochs: 1,
  trainExamples: 0,
  testExamples: 0,
  backend: 'cpu',
  optimizer: 'adam',
  decay: 'cosine',
  model: 'cnn',
};

/** The options that take a word, and the words each takes. */
const CHOICES = {
  '--backend': ['cpu', 'webgpu'],
  '--optimizer': ['adam', 'momentum'],
  '--decay': ['cosine', 'constant'],
  '--model': ['cnn', 'small'],
} as const;

const FLAGS: Record<string, Exclude<keyof MnistRecipe, 'backend' | 'optimizer' | 'decay' | 'model'>> = {
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
    if (flag in CHOICES) {
      const words: readonly string[] = CHOICES[flag as keyof typeof CHOICES];
      if (!words.includes(value))
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `tfjs-mnist: ${flag} is ${words.join(' or ')}, got ${JSON.stringify(value)}`,
        );
      Object.assign(recipe, { [flag.slice(2)]: value });
      continue;
    }
    const key = FLAGS[flag];
    if (!key)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `tfjs-mnist: unknown option ${JSON.stringify(flag)}; the options are ${[...Object.keys(FLAGS), ...Object.keys(CHOICES)].join(', ')}`,
      );
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n < 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `tfjs-mnist: ${flag} needs a number ≥ 0, got ${JSON.stringify(value)}`,
      );
    recipe[key] = n;
  }
  if (!Number.isInteger(recipe.batch) || recipe.batch < 1)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `tfjs-mnist: --batch must be a whole number ≥ 1, got ${recipe.batch}`,
    );
  return recipe;
}

/**
 * The conv net: two 3×3 conv + max-pool blocks and two dense layers; with
 * 'small', one strided 3×3 conv of 4 filters and one dense layer. TF.js's CPU
 * backend computes a conv's filter gradient slowly (seconds a batch for the
 * conv net's), so tests that train on it in a tab use the small one.
 */
export function buildModel(kind: MnistRecipe['model'] = 'cnn'): tfl.Sequential {
  if (kind === 'small') {
    return tfl.sequential({
      layers: [
        tfl.layers.conv2d({ inputShape: [28, 28, 1], filters: 4, kernelSize: 3, strides: 2, activation: 'relu' }),
        tfl.layers.flatten(),
        tfl.layers.dense({ units: 10, activation: 'softmax' }),
      ],
    });
  }
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

export function toTensors(
  s: { images: Float32Array; labels: ArrayLike<number> },
  limit: number,
): { x: tf.Tensor4D; y: tf.Tensor2D } {
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
export async function trainMnist(
  session: hvd.Session,
  data: ringtrainData.MnistSplit,
  recipe: MnistRecipe,
  log: (line: string) => void = () => undefined,
): Promise<TrainResult> {
  const train = toTensors(data.train, recipe.trainExamples);
  const test = toTensors(data.test, recipe.testExamples);
  const [x, y] = hvd.shardTensors([train.x, train.y]); // ringtrain: this rank's share
  const model = buildModel(recipe.model);
  // ringtrain: how long a collective waits for the slowest rank. TF.js's CPU backend holds a rank's event loop
  // through each batch and each evaluation, and on a loaded machine one rank fell 30 s (the default) behind.
  const ring = { timeoutMs: RING_TIMEOUT_MS };
  model.compile({
    // ringtrain: wrap the optimizer; the learning rate grows with the ring (warmed up below)
    optimizer: new hvd.DistributedOptimizer(
      recipe.optimizer === 'adam'
        ? tf.train.adam(recipe.lr * session.size)
        : tf.train.momentum(recipe.lr * session.size, 0.9),
      ring,
    ),
    loss: 'categoricalCrossentropy',
    metrics: ['accuracy'],
  });
  let lastTest = NaN;
  // In chunks of the training batch, waiting for each: the shapes are the ones training compiled, and the
  // event loop answers heartbeats between chunks (batches of 500 kept a loaded Deno + lavapipe rank silent
  // for over 5 minutes, and the server dropped all four ranks of a run).
  const evaluate = async (): Promise<{ accuracy: number; loss: number }> => {
    const n = test.x.shape[0];
    let [loss, accuracy] = [0, 0];
    for (let i = 0; i < n; i += recipe.batch) {
      const size = Math.min(recipe.batch, n - i);
      const [x, y] = [tf.slice(test.x, [i, 0, 0, 0], [size, -1, -1, -1]), tf.slice(test.y, [i, 0], [size, -1])];
      const [l, a] = await Promise.all(
        (model.evaluate(x, y, { batchSize: size }) as tf.Scalar[]).map(async (t) => (await t.data())[0]),
      );
      tf.dispose([x, y]);
      loss += (l * size) / n;
      accuracy += (a * size) / n;
    }
    lastTest = accuracy;
    return { accuracy, loss };
  };
  let steps = 0;
  await model.fit(x, y, {
    epochs: recipe.epochs,
    batchSize: recipe.batch,
    verbose: 0,
    callbacks: [
      new hvd.BroadcastGlobalVariablesCallback(0, ring), // ringtrain: start from rank 0's weights
      new hvd.MetricAverageCallback(ring), // ringtrain: logs averaged over the ring
      new hvd.LearningRateWarmupCallback({ baseLr: recipe.lr, warmupEpochs: recipe.warmupEpochs, decay: recipe.decay }), // ringtrain
      new hvd.TrainEventsCallback({ evaluate }), // ringtrain: steps and test accuracy as ringtrain events (the page draws them)
      new tfl.CustomCallback({
        onBatchEnd: () => void steps++,
        onEpochEnd: (e, l) =>
          log(
            `epoch ${e + 1}/${recipe.epochs}: loss ${l?.loss?.toFixed(4)} accuracy ${l?.acc?.toFixed(4)} test accuracy ${lastTest.toFixed(4)}`,
          ),
      }),
      new hvd.StopTogetherCallback(ring), // ringtrain: if one rank stops, all do
    ],
  });
  const { accuracy } = await evaluate();
  tf.dispose([train.x, train.y, test.x, test.y, x, y]);
  model.dispose();
  return { size: session.size, epochs: recipe.epochs, batchPerRank: recipe.batch, steps, testAccuracy: accuracy };
}
