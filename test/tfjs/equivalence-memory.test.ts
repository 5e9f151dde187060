/**
 * TF.js data-parallel equivalence over an in-process ring (memory links):
 * N ranks running model.fit at batch B with the DistributedOptimizer end
 * where one process at batch N·B does, from the same initial weights on the
 * same examples (plain SGD). Ranks other than 0 start from other weights, so
 * the result also depends on BroadcastGlobalVariablesCallback working.
 * The same over real WebRTC processes: equivalence-webrtc.test.ts.
 */
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import {
  BroadcastGlobalVariablesCallback,
  DistributedOptimizer,
  MetricAverageCallback,
  shardTensors,
} from '../../src/tfjs/index.ts';
import {
  BATCH,
  buildModel,
  digits,
  LR,
  maxRelativeDifference,
  STEPS,
  trainSingle,
  useCpu,
  weightsOf,
} from './model.ts';

beforeAll(useCpu);

describe('TF.js DistributedOptimizer equivalence (memory ring, model.fit)', () => {
  for (const size of [2, 4]) {
    it(`N = ${size} at batch ${BATCH} for ${STEPS} steps = one process at batch ${size * BATCH}`, async () => {
      const n = size * BATCH * STEPS;
      const single = await trainSingle(1, n, size * BATCH);
      const comms = createMemoryRing(size);
      const { x, y } = await digits(n);
      const ranks = await Promise.all(
        comms.map(async (comm, rank) => {
          const model = buildModel(1 + rank);
          model.compile({
            optimizer: new DistributedOptimizer(tf.train.sgd(LR), { comm }),
            loss: 'categoricalCrossentropy',
            metrics: ['accuracy'],
          });
          const [xs, ys] = shardTensors([x, y], { comm });
          const history = await model.fit(xs, ys, {
            batchSize: BATCH,
            epochs: 1,
            shuffle: false,
            verbose: 0,
            callbacks: [new BroadcastGlobalVariablesCallback(0, { comm }), new MetricAverageCallback({ comm })],
          });
          const final = await weightsOf(model);
          tf.dispose([xs, ys]);
          model.dispose();
          return { final, history: history.history, steps: xs.shape[0] / BATCH };
        }),
      );
      comms.forEach((c) => c.close());
      tf.dispose([x, y]);
      // The weights moved (a model that never trains would match trivially)…
      expect(maxRelativeDifference(single.final, single.initial)).toBeGreaterThan(0.01);
      for (const r of ranks) {
        expect(r.steps).toBe(STEPS);
        // …and every rank ends where the single big batch did.
        expect(maxRelativeDifference(r.final, single.final)).toBeLessThanOrEqual(1e-4);
        // MetricAverageCallback: every rank logs the ring's mean loss and accuracy.
        expect(r.history).toEqual(ranks[0].history);
      }
      expect(Number.isFinite(ranks[0].history.loss[0] as number)).toBe(true);
    });
  }
});
