/**
 * A TF.js conv net on MNIST, trained data-parallel with ringtrain. Copy it:
 * everything ringtrain-specific is marked `// ringtrain`.
 *
 *   ringtrain launch -np 4 examples/tfjs-mnist.ts --epochs 3
 *
 * `launch` starts a signaling server and 4 Node processes of this file; they
 * meet over WebRTC. Each trains on its quarter of the data at --batch per
 * rank; the gradients are averaged over the ring every step. Rank 0 prints
 * the test accuracy at the end. TF.js's CPU backend; for WebGPU import
 * '@tensorflow/tfjs-backend-webgpu' and call tf.setBackend('webgpu').
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import * as hvd from 'ringtrain/tfjs'; // ringtrain
import { loadMnist } from '../src/data/mnist.node.ts';

const { values } = parseArgs({ options: { epochs: { type: 'string', default: '3' }, batch: { type: 'string', default: '32' }, lr: { type: 'string', default: '0.05' } } });
const epochs = Number(values.epochs);
const batch = Number(values.batch);
const baseLr = Number(values.lr);

await tf.setBackend('cpu');
// ringtrain: join the job the launcher made. TF.js's CPU backend blocks the event loop for a whole
// batch, so give silent peers a long while before calling them gone.
const session = await hvd.init({ peerTimeoutMs: 120_000 });
const log = (s: string): void => {
  if (session.rank === 0) console.log(s);
};

const mnist = await loadMnist();
const toTensors = (s: { images: Float32Array; labels: ArrayLike<number> }) => ({
  x: tf.tensor4d(s.images, [s.labels.length, 28, 28, 1]),
  y: tf.oneHot(tf.tensor1d(Array.from(s.labels), 'int32'), 10),
});
const train = toTensors(mnist.train);
const test = toTensors(mnist.test);
const [x, y] = hvd.shardTensors([train.x, train.y]); // ringtrain: this rank's share

const model = tfl.sequential({
  layers: [
    tfl.layers.conv2d({ inputShape: [28, 28, 1], filters: 4, kernelSize: 3, padding: 'same', activation: 'relu' }),
    tfl.layers.maxPooling2d({ poolSize: 2 }),
    tfl.layers.conv2d({ filters: 8, kernelSize: 3, padding: 'same', activation: 'relu' }),
    tfl.layers.maxPooling2d({ poolSize: 2 }),
    tfl.layers.flatten(),
    tfl.layers.dense({ units: 32, activation: 'relu' }),
    tfl.layers.dense({ units: 10, activation: 'softmax' }),
  ],
});
model.compile({
  // ringtrain: wrap the optimizer; the learning rate grows with the ring (warmed up below)
  optimizer: new hvd.DistributedOptimizer(tf.train.momentum(baseLr * session.size, 0.9)),
  loss: 'categoricalCrossentropy',
  metrics: ['accuracy'],
});

await model.fit(x, y, {
  epochs,
  batchSize: batch,
  verbose: 0,
  callbacks: [
    new hvd.BroadcastGlobalVariablesCallback(0), // ringtrain: start from rank 0's weights
    new hvd.MetricAverageCallback(), // ringtrain: logs averaged over the ring
    new hvd.LearningRateWarmupCallback({ baseLr, warmupEpochs: 1 }), // ringtrain
    new tfl.CustomCallback({ onEpochEnd: (e, l) => log(`epoch ${e + 1}/${epochs}: loss ${l?.loss?.toFixed(4)} accuracy ${l?.acc?.toFixed(4)}`) }),
    new hvd.StopTogetherCallback(), // ringtrain: if one rank stops, all do
  ],
});

const [, accuracy] = (model.evaluate(test.x, test.y, { batchSize: 500 }) as tf.Scalar[]).map((t) => t.dataSync()[0]);
log(JSON.stringify({ size: session.size, epochs, batchPerRank: batch, testAccuracy: accuracy }));
await session.close('done'); // ringtrain: leave the job (a finished leave breaks no ring)
process.exit(0);
