/**
 * TrainEventsCallback (TF.js fit → ringtrain's train-step and evaluate events,
 * and progress to the server) on a memory ring of 2, and the example's
 * argument parser, which the page uses on a job's `args`.
 */
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import type { Progress } from '../../src/signaling/protocol.ts';
import { createMemoryRing, DistributedOptimizer, shardTensors, TrainEventsCallback } from '../../src/tfjs/index.ts';
import { DEFAULT_RECIPE, parseRecipe } from '../../examples/tfjs-mnist-train.ts';
import { BATCH, buildModel, digits, useCpu } from './model.ts';

beforeAll(useCpu);

describe('TrainEventsCallback', () => {
  it('emits one train-step per batch on each rank, and an evaluate per epoch; a Session-like source also gets progress', async () => {
    const bus = new EventBus();
    const comms = createMemoryRing(2, { events: bus });
    const seen: RingEvent[][] = [[], []];
    bus.on((e) => void ('rank' in e && e.rank >= 0 && e.rank < 2 && seen[e.rank].push(e)));
    const progress: Progress[] = [];
    const { x, y } = await digits(2 * BATCH * 3);
    await Promise.all(
      comms.map(async (comm, rank) => {
        const model = buildModel(1);
        model.compile({
          optimizer: new DistributedOptimizer(tf.train.sgd(0.1), { comm }),
          loss: 'categoricalCrossentropy',
        });
        const [xs, ys] = shardTensors([x, y], { comm });
        // Rank 0 is given a Session-like source (a ring and a server client), rank 1 a bare communicator.
        const source = rank === 0 ? { comm, client: { reportProgress: (p: Progress) => progress.push(p) } } : comm;
        await model.fit(xs, ys, {
          batchSize: BATCH,
          epochs: 2,
          shuffle: false,
          verbose: 0,
          callbacks: [
            new TrainEventsCallback({ comm: source, evaluate: async () => ({ accuracy: 0.5 + rank / 100 }) }),
          ],
        });
      }),
    );
    for (const rank of [0, 1]) {
      const steps = seen[rank].filter((e) => e.type === 'train-step');
      expect(steps.map((e) => e.step)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(steps.map((e) => e.epoch)).toEqual([0, 0, 0, 1, 1, 1]);
      for (const s of steps) {
        expect(s).toMatchObject({ rank, size: 2, samples: BATCH });
        expect(Number.isFinite(s.loss) && s.loss > 0).toBe(true);
      }
      // Every step's allreduce sent bytes: the count grows.
      expect(steps[5].bytesSent).toBeGreaterThan(steps[0].bytesSent);
      const evals = seen[rank].filter((e) => e.type === 'evaluate');
      expect(evals.map((e) => [e.epoch, e.step, e.testAccuracy])).toEqual([
        [0, 3, 0.5 + rank / 100],
        [1, 6, 0.5 + rank / 100],
      ]);
    }
    // Progress is throttled, but the first step and every evaluation go out.
    expect(progress[0]).toMatchObject({ step: 1, epoch: 0 });
    expect(progress.filter((p) => p.testAccuracy !== undefined).map((p) => p.step)).toEqual([3, 6]);
  });
});

describe("the TF.js example's arguments (parseRecipe)", () => {
  it('reads every option and keeps the defaults for the rest', () => {
    expect(parseRecipe([])).toEqual(DEFAULT_RECIPE);
    expect(
      parseRecipe(['--epochs', '1', '--batch', '16', '--lr', '0.01', '--train-examples', '512', '--backend', 'webgpu']),
    ).toEqual({ ...DEFAULT_RECIPE, epochs: 1, batch: 16, lr: 0.01, trainExamples: 512, backend: 'webgpu' });
    expect(parseRecipe(['--optimizer', 'momentum', '--decay', 'constant', '--model', 'small'])).toEqual({
      ...DEFAULT_RECIPE,
      optimizer: 'momentum',
      decay: 'constant',
      model: 'small',
    });
  });
  it('refuses unknown options, missing or bad numbers and unknown backends, saying which', () => {
    const refusal = (args: string[]) => {
      try {
        parseRecipe(args);
      } catch (err) {
        return { code: (err as { code?: string }).code, message: (err as Error).message };
      }
      return null;
    };
    expect(refusal(['--epoch', '1'])).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('"--epoch"'),
    });
    expect(refusal(['--lr'])).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('--lr needs a number'),
    });
    expect(refusal(['--batch', '0'])).toMatchObject({
      message: expect.stringContaining('--batch must be a whole number'),
    });
    expect(refusal(['--batch', '2.5'])).toMatchObject({
      message: expect.stringContaining('--batch must be a whole number'),
    });
    expect(refusal(['--backend', 'webgl'])).toMatchObject({
      message: expect.stringContaining('--backend is cpu or webgpu'),
    });
    expect(refusal(['--optimizer', 'sgd'])).toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('--optimizer is adam or momentum, got "sgd"'),
    });
    expect(refusal(['--model'])).toMatchObject({
      message: expect.stringContaining('--model is cnn or small, got undefined'),
    });
  });
});
