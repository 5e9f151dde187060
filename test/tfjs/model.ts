/**
 * The TF.js model and data of the tfjs tests: a small conv + dense network
 * on real MNIST digits, CPU backend. `seed` fixes the initial weights, so a
 * rank built with another seed starts elsewhere until broadcastVariables.
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { loadMnist } from '../../src/data/mnist.node.ts';

export const LR = 0.1;
export const BATCH = 16;
export const STEPS = 20;

export async function useCpu(): Promise<void> {
  await tf.setBackend('cpu');
  await tf.ready();
}

export function buildModel(seed: number, hidden = 16): tfl.Sequential {
  const k = (s: number) => tfl.initializers.glorotUniform({ seed: seed * 10 + s });
  return tfl.sequential({
    layers: [
      tfl.layers.conv2d({
        inputShape: [28, 28, 1],
        filters: 4,
        kernelSize: 3,
        strides: 2,
        activation: 'relu',
        kernelInitializer: k(1),
      }),
      tfl.layers.flatten(),
      tfl.layers.dense({ units: hidden, activation: 'relu', kernelInitializer: k(2) }),
      tfl.layers.dense({ units: 10, activation: 'softmax', kernelInitializer: k(3) }),
    ],
  });
}

/** The first `n` training digits as [n,28,28,1] images and one-hot labels. */
export async function digits(n: number): Promise<{ x: tf.Tensor4D; y: tf.Tensor2D }> {
  const mnist = await loadMnist();
  const x = tf.tensor4d(mnist.train.images.subarray(0, n * 784), [n, 28, 28, 1]);
  const y = tf.oneHot(tf.tensor1d(Array.from(mnist.train.labels.subarray(0, n)), 'int32'), 10) as tf.Tensor2D;
  return { x, y };
}

export async function weightsOf(model: tfl.LayersModel): Promise<Float32Array[]> {
  return Promise.all(model.getWeights().map(async (w) => (await w.data()) as Float32Array));
}

/** Per tensor: the largest absolute difference over the tensor's largest magnitude; the worst tensor's figure. */
export function maxRelativeDifference(a: Float32Array[], b: Float32Array[]): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  a.forEach((t, i) => {
    const ref = b[i];
    if (t.length !== ref.length) worst = Infinity;
    let diff = 0;
    let scale = 0;
    for (let j = 0; j < ref.length; j++) {
      diff = Math.max(diff, Math.abs(t[j] - ref[j]));
      scale = Math.max(scale, Math.abs(ref[j]));
    }
    worst = Math.max(worst, diff / Math.max(scale, 1e-12));
  });
  return worst;
}

/** One process at batch `batch` over `n` examples in order (plain SGD), starting from `seed`'s weights. */
export async function trainSingle(
  seed: number,
  n: number,
  batch: number,
): Promise<{ initial: Float32Array[]; final: Float32Array[] }> {
  const model = buildModel(seed);
  model.compile({ optimizer: tf.train.sgd(LR), loss: 'categoricalCrossentropy' });
  const initial = await weightsOf(model);
  const { x, y } = await digits(n);
  await model.fit(x, y, { batchSize: batch, epochs: 1, shuffle: false, verbose: 0 });
  tf.dispose([x, y]);
  const final = await weightsOf(model);
  model.dispose();
  return { initial, final };
}
