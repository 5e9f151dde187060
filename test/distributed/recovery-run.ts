/**
 * Runs the trainer's run-ending cases under Deno (real kernels on lavapipe,
 * real trainer; a ring over memory links with stand-in elastic hooks whose
 * regroup fails the way a lost server's does) and prints one JSON line for
 * recovery.test.ts to judge.
 *
 * Usage: deno run -A test/distributed/recovery-run.ts
 */
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import {
  trainDistributed,
  type DistributedTrainConfig,
  type ElasticHooks,
} from '../../src/distributed/train/trainer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';

const gpu = await acquireGpu();
const mnist = await loadMnist();
const px = 784;
const train = makeImageDataset({
  images: mnist.train.images.slice(0, 512 * px),
  labels: mnist.train.labels.slice(0, 512),
  height: 28,
  width: 28,
  classes: 10,
});
const test = makeImageDataset({
  images: mnist.test.images.slice(0, 64 * px),
  labels: mnist.test.labels.slice(0, 64),
  height: 28,
  width: 28,
  classes: 10,
});
const base: DistributedTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  batch: 8,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 3,
  steps: 20,
};

/** Hooks of an elastic job whose server is gone: a regroup can only fail. */
const noServer: ElasticHooks = {
  currentEpoch: () => ({ generation: 0, epoch: 1 }),
  latestEpoch: () => ({ generation: 0, epoch: 1 }),
  regroup: () => Promise.reject(new RingtrainError(ErrorCode.Signaling, 'stand-in: no server to regroup through')),
};

const summary = (c: TrainingCheckpoint) => ({
  step: c.step,
  finite: Object.values(c.params).every((t) => t.data.every(Number.isFinite)),
  first: Object.values(c.params)[0].data[0],
});

/** Rank 1 forges an abort after `abortAt` completed steps (0: before the first). */
async function forgedAbort(abortAt: number) {
  const comms = createMemoryRing(2);
  const saved: ReturnType<typeof summary>[][] = [[], []];
  const forge = () => comms[1].abort(new RingtrainError(ErrorCode.PeerLost, 'rank 9 left (a lie)', { peer: 9 }));
  if (abortAt === 0) forge();
  const results = await Promise.all(
    comms.map((comm, r) =>
      trainDistributed({
        gpu,
        comm,
        train,
        test,
        config: { ...base, elastic: true },
        elastic: noServer,
        onStep: (s) => void (r === 1 && s.step === abortAt && forge()),
        onRecovery: (c, why) => void saved[r].push({ ...summary(c), why: why.code } as ReturnType<typeof summary>),
      }),
    ),
  );
  comms.forEach((c) => c.close());
  return results.map((res, r) => ({
    steps: res.steps,
    completed: res.completedSteps,
    stoppedBy: res.stoppedBy?.code ?? null,
    noRecovery: res.noRecovery ?? null,
    saved: saved[r],
  }));
}

/** A learning rate that makes the loss blow up: the run ends with ERR_INVALID_ARGUMENT. */
async function diverged() {
  const comms = createMemoryRing(2);
  const saved: ReturnType<typeof summary>[] = [];
  let lastStep = 0;
  const outcomes = await Promise.allSettled(
    comms.map((comm, r) =>
      trainDistributed({
        gpu,
        comm,
        train,
        test,
        config: { ...base, lr: 1e9, steps: 50 },
        onStep: (s) => void (r === 0 && (lastStep = s.step)),
        onRecovery: (c) => void (r === 0 && saved.push(summary(c))),
      }),
    ),
  );
  comms.forEach((c) => c.close());
  const first = outcomes[0];
  return { rejected: first.status === 'rejected' ? (first.reason as RingtrainError).code : null, lastStep, saved };
}

console.log(
  JSON.stringify({ midRun: await forgedAbort(3), beforeFirstStep: await forgedAbort(0), diverged: await diverged() }),
);
gpu.destroy();
