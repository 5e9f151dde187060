/**
 * One worker of the TF.js equivalence test over real WebRTC, started by
 * `ringtrain launch -np N test/tfjs/fit-peer.ts` (equivalence-webrtc.test.ts):
 * init() from the launcher's environment, model.fit with the
 * DistributedOptimizer and the callbacks, then one JSON line with the final
 * weights. Each rank starts from its own seed; BroadcastGlobalVariablesCallback
 * must make them rank 0's.
 */
import process from 'node:process';
import * as tf from '@tensorflow/tfjs-core';
import { FINISHED } from '../../src/distributed/session/session.ts';
import {
  BroadcastGlobalVariablesCallback,
  DistributedOptimizer,
  init,
  MetricAverageCallback,
  shardTensors,
  StopTogetherCallback,
} from '../../src/tfjs/index.node.ts';
import { BATCH, buildModel, digits, LR, STEPS, useCpu, weightsOf } from './model.ts';

await useCpu();
// Generous: peers share two cores with other tests, and a starved peer must not look dead.
const session = await init({ peerTimeoutMs: 20_000 });
const { rank, size } = session;
const model = buildModel(1 + rank);
model.compile({
  optimizer: new DistributedOptimizer(tf.train.sgd(LR)),
  loss: 'categoricalCrossentropy',
  metrics: ['accuracy'],
});
const { x, y } = await digits(size * BATCH * STEPS);
const [xs, ys] = shardTensors([x, y]);
const history = await model.fit(xs, ys, {
  batchSize: BATCH,
  epochs: 1,
  shuffle: false,
  verbose: 0,
  callbacks: [new BroadcastGlobalVariablesCallback(0), new MetricAverageCallback(), new StopTogetherCallback()],
});
const weights = await weightsOf(model);
const flat = new Float32Array(weights.reduce((a, w) => a + w.length, 0));
weights.reduce((o, w) => (flat.set(w, o), o + w.length), 0);
const line = JSON.stringify({
  rank,
  size,
  lengths: weights.map((w) => w.length),
  weights: Buffer.from(flat.buffer).toString('base64'),
  history: history.history,
});
await new Promise<void>((resolve) => process.stdout.write(line + '\n', () => resolve()));
await session.close(FINISHED);
process.exit(0);
