/**
 * A tab joins a TF.js job: the job's config names the TF.js example's model
 * (examples/tfjs-mnist-train.ts) and carries the example's arguments, and the
 * tab runs that same training with TF.js in the page, as one more rank beside
 * the `ringtrain launch` processes. Loaded only for such jobs (TF.js is big).
 * TF.js's events go to the page's bus through the session, so the live ring
 * and the charts draw this job like any other.
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { MnistSplit } from '../../src/data/mnist.ts';
import { FINISHED, type Session } from '../../src/distributed/session/session.ts';
import { setDefaultRing } from '../../src/tfjs/index.ts';
import { parseRecipe, trainMnist, TFJS_MNIST_MODEL } from '../../examples/tfjs-mnist-train.ts';

/** TF.js backends the page can load: the CPU one always, WebGPU where the browser has it. */
async function useBackend(name: 'cpu' | 'webgpu'): Promise<void> {
  if (name === 'webgpu') await import('@tensorflow/tfjs-backend-webgpu');
  if (!(await tf.setBackend(name)))
    throw new RingtrainError(
      ErrorCode.NoAdapter,
      `TF.js job: TF.js's ${name} backend does not start in this browser; launch the job with --backend cpu`,
    );
}

export interface TfjsJoined {
  finished: Promise<string>;
  leave(): Promise<void>;
}

/** Trains this tab's share of the job's TF.js model; `session` is a joined one (init's). */
export async function trainTfjsJob(session: Session, data: MnistSplit): Promise<TfjsJoined> {
  const { model } = session.job.config;
  if (model !== TFJS_MNIST_MODEL) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `TF.js job: the page knows the TF.js model ${TFJS_MNIST_MODEL} only, and this job trains ${JSON.stringify(model)}`,
    );
  }
  const recipe = parseRecipe((session.settings.model.args ?? '').split(/\s+/).filter(Boolean));
  await useBackend(recipe.backend);
  setDefaultRing(session);
  const finished = trainMnist(session, data, recipe).then(
    async (r) => {
      await session.close(FINISHED);
      return `Training finished: ${r.steps} steps, test accuracy ${(r.testAccuracy * 100).toFixed(1)}% (TF.js, ${tf.getBackend()} backend).`;
    },
    async (err: unknown) => {
      await session.close('error');
      throw err;
    },
  );
  return {
    finished,
    async leave() {
      await session.close('left the page');
    },
  };
}
