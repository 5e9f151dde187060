/**
 * Training alone is the ring's loop at one rank: trainLocal and trainDistributed
 * over a one-rank in-memory ring run the same loop (training-loop.ts) with
 * another part for the peers. Over two epochs and a stop mid-epoch they take
 * the same steps with the same losses, evaluate at the same steps with the same
 * metrics, emit the same events, and hand out the same weights and optimizer
 * state; only how each reads its losses (alone: every few steps, the gradients
 * never leaving the GPU; a ring: every step, with its gradients) and what its
 * checkpoint files record differ.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
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

const train = quadrants(170, 1); // 10 steps of 16 per epoch, 10 examples left over
const test = quadrants(60, 2);
// Momentum and a cosine schedule: an optimizer state to hand out, and a rate that moves every step.
const config: LocalTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 3,
  batch: 16,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 5,
  lrSchedule: 'cosine',
  readEvery: 4,
};
/** Stops after this step: mid-way through the third epoch, between two of the single peer's loss reads. */
const STOP_AFTER = 25;

/** What the loop did, as its events tell it (times and rates left out), and the metrics of each evaluation. */
function listen(bus: EventBus) {
  const steps: string[] = [];
  const compute: string[] = [];
  const evaluations: { step: number; epoch: number; accuracy: number; loss: number }[] = [];
  bus.on((e: RingEvent) => {
    if (e.type === 'train-step') steps.push(`step ${e.step} epoch ${e.epoch} loss ${e.loss} samples ${e.samples}`);
    else if (e.type === 'evaluate') {
      steps.push(`evaluate at ${e.step} epoch ${e.epoch}`);
      evaluations.push({ step: e.step, epoch: e.epoch, accuracy: e.testAccuracy, loss: e.testLoss ?? NaN });
    } else if (e.type === 'compute-begin' || e.type === 'compute-end') compute.push(`${e.type} ${e.step}`);
  });
  return { steps, compute, evaluations };
}

/** Stops after the step that reports `step` or later (the single peer reports a few at a time). */
function stopAfter(bus: EventBus, step: number): () => boolean {
  let stop = false;
  bus.on((e) => void (e.type === 'train-step' && e.step >= step && (stop = true)));
  return () => stop;
}

describe('one loop: a single peer is the ring of one', () => {
  it('takes the same steps, evaluations and hand-outs as trainDistributed on a one-rank ring', async () => {
    const aloneBus = new EventBus();
    const alone = listen(aloneBus);
    const aloneSaved: TrainingCheckpoint[] = [];
    const stop = new AbortController();
    const stopAlone = stopAfter(aloneBus, STOP_AFTER);
    aloneBus.on(() => void (stopAlone() && stop.abort()));
    const local = await trainLocal({
      gpu,
      train,
      test,
      config,
      bus: aloneBus,
      signal: stop.signal,
      onCheckpoint: (c) => void aloneSaved.push(c),
    });

    const [comm] = createMemoryRing(1);
    const ringBus = new EventBus();
    const ring = listen(ringBus);
    const ringSaved: TrainingCheckpoint[] = [];
    const distributed = await trainDistributed({
      gpu,
      comm,
      train,
      test,
      config,
      bus: ringBus,
      shouldStop: stopAfter(ringBus, local.steps),
      onCheckpoint: (c) => void ringSaved.push(c),
    });
    comm.close();

    // Alone, losses are read 4 steps at a time: the stop asked after step 25 came with step 28's read.
    expect([local.steps, local.interrupted, distributed.steps]).toEqual([28, true, 28]);
    // The same steps with the same losses, the evaluations at the same places, the same compute spans.
    expect(alone.steps).toEqual(ring.steps);
    expect(alone.compute).toEqual(ring.compute);
    expect(alone.evaluations.map((e) => [e.step, e.epoch])).toEqual([
      [10, 0],
      [20, 1],
      [28, 2],
    ]);
    expect(local.trainLoss).toBe(distributed.trainLoss);
    // A ring averages its metrics over ranks in float32; alone, they are the model's own.
    alone.evaluations.forEach((e, i) => {
      expect(e.accuracy).toBeCloseTo(ring.evaluations[i].accuracy, 6);
      expect(e.loss).toBeCloseTo(ring.evaluations[i].loss, 6);
    });
    // Hand-outs after each epoch and at the stop: the same weights and optimizer state, each in its own kind of file.
    expect(aloneSaved.map((c) => [c.step, c.epoch])).toEqual([
      [10, 1],
      [20, 2],
      [28, 2],
    ]);
    expect(ringSaved.map((c) => [c.step, c.epoch])).toEqual([
      [10, 1],
      [20, 2],
      [28, 2],
    ]);
    aloneSaved.forEach((c, i) => {
      expect(c.params).toEqual(ringSaved[i].params);
      expect(c.optimizerState).toEqual(ringSaved[i].optimizerState);
    });
    expect(aloneSaved[2].extra).toMatchObject({ lr_schedule: 'cosine', batch: '16' });
    expect(ringSaved[2].extra).toMatchObject({ global_batch: '16', size: '1', epoch_examples: '128' });
    // Alone, the loop never waited for the GPU per step (a ring of one waits at every step's gradient read).
    expect(local.gpuWaits).toBeLessThan(local.steps);
  });
});
