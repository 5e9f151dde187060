/**
 * An evaluation that fails is a measurement lost, never the run: the
 * checkpoint where training stops is handed out before the evaluation starts,
 * the run ends normally with the failure reported (its RingtrainError, code
 * and all), and a ring's ranks all finish, the failing rank with its own
 * error and the others with one saying a peer's evaluation failed.
 *
 * The failure is a real one: a validation set holding a label outside the
 * model's classes, which the loss head refuses while every training batch is
 * fine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { EventBus } from '../../src/core/events.ts';
import type { Dataset } from '../../src/data/dataset.ts';
import { trainLocal, type LocalTrainConfig } from '../../src/distributed/train/train-local.ts';
import { trainDistributed } from '../../src/distributed/train/trainer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { quadrants } from '../support/quadrants.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

const train = quadrants(160, 1); // 10 steps of 16 per epoch
const good = quadrants(60, 2);
/** The last validation example's label is 7, of 4 classes: the evaluation refuses it (in a ring of 2, rank 1's part holds it). */
const bad: Dataset = { ...good, labels: Int32Array.from(good.labels, (l, i) => (i === good.count - 1 ? 7 : l)) };
const config: LocalTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  steps: 15,
  batch: 16,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 5,
  readEvery: 4,
};
const labelRefused = expect.objectContaining({
  code: ErrorCode.InvalidArgument,
  message: expect.stringMatching(/label \d+ is 7/),
});

describe('a failing evaluation', () => {
  it('alone: the run ends normally, with a checkpoint at the epoch and at the stop, and the failure reported', async () => {
    const bus = new EventBus();
    let evaluations = 0;
    bus.on((e) => void (e.type === 'evaluate' && evaluations++));
    const saved: TrainingCheckpoint[] = [];
    const result = await trainLocal({ gpu, train, test: bad, config, bus, onCheckpoint: (c) => void saved.push(c) });
    expect(result.steps).toBe(15);
    expect(saved.map((c) => c.step)).toEqual([10, 15]);
    expect(result.evaluationFailure).toEqual(labelRefused);
    expect(result.testAccuracy).toBeNaN();
    expect(evaluations).toBe(0);

    // The same run on a sound validation set evaluates twice and reports no failure.
    const sound = await trainLocal({ gpu, train, test: good, config });
    expect(sound.evaluationFailure).toBeUndefined();
    expect(sound.testAccuracy).toBeGreaterThan(0.5);
  });

  it('in a ring: every rank finishes; the failing rank reports its own error, the others a peer’s', async () => {
    const comms = createMemoryRing(2);
    const saved: TrainingCheckpoint[] = [];
    const results = await Promise.all(
      comms.map((comm) =>
        trainDistributed({
          gpu,
          comm,
          train,
          test: bad,
          config: { ...config, batch: 8 },
          onCheckpoint: (c) => void saved.push(c),
        }),
      ),
    );
    for (const c of comms) c.close();
    expect(results.map((r) => [r.rank, r.steps, r.stoppedBy])).toEqual([
      [0, 15, undefined],
      [1, 15, undefined],
    ]);
    expect(saved.map((c) => c.step)).toEqual([10, 15]);
    expect(results[1].evaluationFailure).toEqual(labelRefused);
    expect(results[0].evaluationFailure).toMatchObject({
      code: ErrorCode.InvalidArgument,
      detail: { peerEvaluationFailed: true },
    });
  });
});
