/**
 * A rank whose model has another variable layout is refused before any
 * gradient moves, on every rank, with an error naming the first differing
 * variable and both shapes (memory ring, real collectives).
 */
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { isRingtrainError } from '../../src/core/errors.ts';
import { broadcastVariables, DistributedOptimizer } from '../../src/tfjs/index.ts';
import { firstDifference } from '../../src/tfjs/layout.ts';
import { buildModel, digits, useCpu } from './model.ts';

beforeAll(useCpu);

async function settle<T>(ps: Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
  return Promise.allSettled(ps);
}

function expectRefusal(r: PromiseSettledResult<unknown>): string {
  expect(r.status).toBe('rejected');
  const err = (r as PromiseRejectedResult).reason;
  expect(isRingtrainError(err, 'ERR_COLLECTIVE_MISMATCH'), String(err)).toBe(true);
  return (err as Error).message;
}

describe('TF.js variable layout agreement', () => {
  it('broadcastVariables refuses a rank with a wider dense layer, naming the variable and both shapes', async () => {
    const comms = createMemoryRing(2);
    const models = [buildModel(1, 16), buildModel(2, 17)];
    const results = await settle(models.map((m, rank) => broadcastVariables(m, 0, { comm: comms[rank] })));
    for (const r of results) {
      const message = expectRefusal(r);
      // Variable #2 is the hidden dense layer's kernel: [676,16] on rank 0, [676,17] on rank 1.
      expect(message).toMatch(/variable #2 'dense_Dense\d+\/kernel'/);
      expect(message).toContain('float32[676,16]');
      expect(message).toContain('float32[676,17]');
    }
    // Nothing was overwritten: rank 1 kept its own (differently shaped) weights.
    expect(models[1].getWeights()[2].shape).toEqual([676, 17]);
    comms.forEach((c) => c.close());
    models.forEach((m) => m.dispose());
  });

  it('model.fit with the DistributedOptimizer refuses it too, before the first update', async () => {
    const comms = createMemoryRing(2);
    const models = [buildModel(1, 16), buildModel(2, 8)];
    const { x, y } = await digits(32);
    const before = models.map((m) => m.getWeights().map((w) => w.dataSync().slice()));
    const results = await settle(
      models.map((m, rank) => {
        m.compile({
          optimizer: new DistributedOptimizer(tf.train.sgd(0.1), { comm: comms[rank] }),
          loss: 'categoricalCrossentropy',
        });
        return m.fit(x, y, { batchSize: 16, epochs: 1, shuffle: false, verbose: 0 });
      }),
    );
    for (const r of results) expect(expectRefusal(r)).toContain('float32[676,8]');
    models.forEach((m, i) => m.getWeights().forEach((w, j) => expect(w.dataSync()).toEqual(before[i][j])));
    comms.forEach((c) => c.close());
    tf.dispose([x, y]);
  });

  it('a missing variable reads as (none)', () => {
    const a = { name: 'a', shape: [2], dtype: 'float32' };
    const b = { name: 'b', shape: [3], dtype: 'float32' };
    expect(
      firstDifference([
        [a, b],
        [a, b],
      ]),
    ).toBeNull();
    const d = firstDifference([[a, b], [a]]);
    expect(d?.index).toBe(1);
    expect(d?.message).toContain("rank 0 has 'b' float32[3], rank 1 has (none)");
  });
});
