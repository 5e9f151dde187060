/**
 * The DistributedOptimizer's options and the fit callbacks, on memory rings
 * with real collectives and TF.js's CPU backend: backward passes per step,
 * fp16 compression, custom loops, trainOnBatch, stopping together, the
 * learning-rate warm-up, optimizer state, dataset sharding.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { isRingtrainError } from '../../src/core/errors.ts';
import {
  broadcastOptimizerState,
  BroadcastGlobalVariablesCallback,
  DistributedOptimizer,
  LearningRateWarmupCallback,
  shardDataset,
  shardIndices,
  shardTensors,
  StopTogetherCallback,
  type DistributedOptimizerOptions,
} from '../../src/tfjs/index.ts';
import { buildModel, digits, LR, maxRelativeDifference, trainSingle, useCpu, weightsOf } from './model.ts';

beforeAll(useCpu);

/** Runs `body` on every rank of a fresh memory ring, closing it after. */
async function onRing<T>(size: number, body: (comm: Communicator, rank: number) => Promise<T>): Promise<T[]> {
  const comms = createMemoryRing(size);
  try {
    return await Promise.all(comms.map((c, r) => body(c, r)));
  } finally {
    comms.forEach((c) => c.close());
  }
}

async function fitRanks(
  size: number,
  batch: number,
  n: number,
  opts: Omit<DistributedOptimizerOptions, 'comm'>,
): Promise<Float32Array[][]> {
  const { x, y } = await digits(n);
  const out = await onRing(size, async (comm, rank) => {
    const model = buildModel(1 + rank);
    model.compile({
      optimizer: new DistributedOptimizer(tf.train.sgd(LR), { comm, ...opts }),
      loss: 'categoricalCrossentropy',
    });
    const [xs, ys] = shardTensors([x, y], { comm });
    await model.fit(xs, ys, {
      batchSize: batch,
      epochs: 1,
      shuffle: false,
      verbose: 0,
      callbacks: [new BroadcastGlobalVariablesCallback(0, { comm })],
    });
    tf.dispose([xs, ys]);
    return weightsOf(model);
  });
  tf.dispose([x, y]);
  return out;
}

describe('DistributedOptimizer options', () => {
  it('backwardPassesPerStep 2: 2 ranks at batch 8 update like one process at batch 32', async () => {
    const single = await trainSingle(1, 320, 32);
    const ranks = await fitRanks(2, 8, 320, { backwardPassesPerStep: 2 });
    for (const w of ranks) expect(maxRelativeDifference(w, single.final)).toBeLessThanOrEqual(1e-4);
  });

  it('fp16 compression: close to the float32 result, identical on every rank', async () => {
    const single = await trainSingle(1, 160, 32);
    const ranks = await fitRanks(2, 16, 160, { compression: 'fp16' });
    expect(maxRelativeDifference(ranks[0], single.final)).toBeLessThanOrEqual(2e-2);
    expect(maxRelativeDifference(ranks[1], ranks[0])).toBe(0);
  });

  it('minimizeAsync in a custom loop averages the gradients of tf.variables', async () => {
    const finals = await onRing(2, async (comm, rank) => {
      const w = tf.variable(tf.tensor1d([1, -1]));
      const opt = new DistributedOptimizer(tf.train.sgd(0.5), { comm });
      // Rank r's loss is (w·[1,1] - r)^2 / 2: gradients differ per rank, the average is what moves w.
      await opt.minimizeAsync(() => tf.mul(0.5, tf.square(tf.sub(tf.sum(w), rank))) as tf.Scalar, false, [w]);
      const got = Array.from(await w.data());
      w.dispose();
      return got;
    });
    // Gradient on rank r: (0 - r)·[1,1]; average -0.5·[1,1]; w - 0.5·(-0.5) = w + 0.25.
    for (const f of finals) expect(f).toEqual([1.25, -0.75]);
  });

  it('trainOnBatch without flush() is refused with what to do; with it, it trains', async () => {
    const { x, y } = await digits(16);
    await onRing(1, async (comm) => {
      const model = buildModel(1);
      const opt = new DistributedOptimizer(tf.train.sgd(LR), { comm });
      model.compile({ optimizer: opt, loss: 'categoricalCrossentropy' });
      const before = await weightsOf(model);
      await model.trainOnBatch(x, y);
      const err = await model.trainOnBatch(x, y).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isRingtrainError(err, 'ERR_INVALID_ARGUMENT')).toBe(true);
      expect((err as Error).message).toContain('await optimizer.flush()');
      expect(await opt.flush()).toBe(true);
      expect(maxRelativeDifference(await weightsOf(model), before)).toBeGreaterThan(0);
      model.dispose();
    });
    tf.dispose([x, y]);
  });

  it('refuses bad options', () => {
    expect(() => new DistributedOptimizer(tf.train.sgd(0.1), { backwardPassesPerStep: 0 })).toThrow(
      /backwardPassesPerStep must be a positive integer/,
    );
    expect(() => new DistributedOptimizer(tf.train.sgd(0.1), { compression: 'int8' as 'fp16' })).toThrow(
      /unknown compression 'int8'/,
    );
    expect(() => new DistributedOptimizer({} as tf.Optimizer)).toThrow(/wraps a TF.js optimizer/);
  });
});

describe('fit callbacks', () => {
  it('StopTogetherCallback: when one rank stops after epoch 0, every rank does', async () => {
    const { x, y } = await digits(64);
    const epochs = await onRing(2, async (comm, rank) => {
      const model = buildModel(1);
      model.compile({
        optimizer: new DistributedOptimizer(tf.train.sgd(LR), { comm }),
        loss: 'categoricalCrossentropy',
      });
      const [xs, ys] = shardTensors([x, y], { comm });
      const stopOnRank1 = new tfl.CustomCallback({
        onEpochEnd: () => void (rank === 1 && (model.stopTraining = true)),
      });
      const h = await model.fit(xs, ys, {
        batchSize: 16,
        epochs: 3,
        shuffle: false,
        verbose: 0,
        callbacks: [stopOnRank1, new StopTogetherCallback({ comm })],
      });
      return h.epoch.length;
    });
    expect(epochs).toEqual([1, 1]);
    tf.dispose([x, y]);
  });

  it('LearningRateWarmupCallback ramps from baseLr to baseLr × size over the warm-up, then stays', async () => {
    const { x, y } = await digits(96);
    const rates = await onRing(2, async (comm) => {
      const model = buildModel(1);
      const opt = new DistributedOptimizer(tf.train.sgd(1), { comm });
      model.compile({ optimizer: opt, loss: 'categoricalCrossentropy' });
      const [xs, ys] = shardTensors([x, y], { comm });
      const seen: number[] = [];
      const read = new tfl.CustomCallback({
        onBatchBegin: () => void seen.push((opt.optimizer as unknown as { learningRate: number }).learningRate),
      });
      await model.fit(xs, ys, {
        batchSize: 8,
        epochs: 1,
        shuffle: false,
        verbose: 0,
        callbacks: [new LearningRateWarmupCallback({ comm, baseLr: 0.01, warmupSteps: 4 }), read],
      });
      return seen;
    });
    for (const r of rates) {
      expect(r).toHaveLength(6);
      [0.01, 0.0125, 0.015, 0.0175, 0.02, 0.02].forEach((v, i) => expect(r[i]).toBeCloseTo(v, 9));
    }
    tf.dispose([x, y]);
  });

  it("LearningRateWarmupCallback with decay 'cosine' anneals to zero by the end of fit, over all its epochs", async () => {
    const { x, y } = await digits(64);
    const rates = await onRing(2, async (comm) => {
      const model = buildModel(1);
      const opt = new DistributedOptimizer(tf.train.adam(1), { comm });
      model.compile({ optimizer: opt, loss: 'categoricalCrossentropy' });
      const [xs, ys] = shardTensors([x, y], { comm });
      const seen: number[] = [];
      const read = new tfl.CustomCallback({
        onBatchBegin: () => void seen.push((opt.optimizer as unknown as { learningRate: number }).learningRate),
      });
      // 32 examples at 8: 4 steps an epoch, 2 epochs; a warm-up of half an epoch (2 steps), then 6 of cosine.
      await model.fit(xs, ys, {
        batchSize: 8,
        epochs: 2,
        shuffle: false,
        verbose: 0,
        callbacks: [new LearningRateWarmupCallback({ comm, baseLr: 0.01, warmupEpochs: 0.5, decay: 'cosine' }), read],
      });
      return seen;
    });
    const cosine = (k: number) => 0.02 * 0.5 * (1 + Math.cos((Math.PI * k) / 6));
    for (const r of rates) {
      expect(r).toHaveLength(8);
      [0.01, 0.015, cosine(0), cosine(1), cosine(2), cosine(3), cosine(4), cosine(5)].forEach((v, i) =>
        expect(r[i]).toBeCloseTo(v, 9),
      );
    }
    tf.dispose([x, y]);
  });

  it("broadcastOptimizerState gives a fresh Adam rank 0's step count and moments", async () => {
    const states = await onRing(2, async (comm, rank) => {
      const w = tf.variable(tf.tensor1d([0.5, -2, 3]), true, `w${rank}`);
      const adam = tf.train.adam(0.1);
      // Only rank 0 has trained (two local steps): it has moments, rank 1 has none.
      if (rank === 0) for (let i = 0; i < 2; i++) adam.minimize(() => tf.sum(tf.square(w)) as tf.Scalar, false, [w]);
      await broadcastOptimizerState(adam, 0, { comm });
      const weights = await adam.getWeights();
      return {
        iterations: adam.iterations,
        values: await Promise.all(weights.map(async (t) => Array.from(await t.tensor.data()))),
      };
    });
    expect(states[0].iterations).toBe(2);
    expect(states[1]).toEqual(states[0]);
    expect(states[0].values).toHaveLength(3); // step count, first and second moment
  });
});

describe('sharding', () => {
  it('rank r of N takes r, r+N, …, the same count on every rank', () => {
    expect(Array.from(shardIndices(10, { rank: 1, size: 3 }))).toEqual([1, 4, 7]);
    expect(Array.from(shardIndices(10, { rank: 0, size: 3 }))).toEqual([0, 3, 6]);
    expect(() => shardIndices(10, { rank: 3, size: 3 })).toThrow(/rank 3 of size 3/);
  });

  it('skip leaves out what an epoch already took and shards the rest over the ring as it is now (elastic resume)', () => {
    // 3 ranks took 2 steps of 3 × 2 = 12 examples; the ring re-formed with 2.
    expect(Array.from(shardIndices(20, { rank: 0, size: 2, skip: 12 }))).toEqual([12, 14, 16, 18]);
    expect(Array.from(shardIndices(20, { rank: 1, size: 2, skip: 12 }))).toEqual([13, 15, 17, 19]);
    expect(Array.from(shardIndices(20, { rank: 1, size: 2, skip: 20 }))).toEqual([]);
    expect(() => shardIndices(20, { rank: 0, size: 2, skip: 21 })).toThrow(
      /skip 21 is not a count of examples already taken out of 20/,
    );
    expect(() =>
      shardDataset(
        { size: 4, iterator: async () => ({ next: async () => ({ done: true as const, value: undefined }) }) },
        { rank: 0, size: 2, skip: 2 },
      ),
    ).toThrow(/dataset\.skip/);
  });

  it('shardDataset feeds model.fitDataset every N-th batch; the ranks train in step', async () => {
    const { x, y } = await digits(128);
    const batches = Array.from({ length: 8 }, (_, i) => ({ xs: tf.slice(x, i * 16, 16), ys: tf.slice(y, i * 16, 16) }));
    const dataset = {
      size: batches.length,
      async iterator() {
        let i = 0;
        return {
          next: async () =>
            i < batches.length
              ? { done: false as const, value: batches[i++] }
              : { done: true as const, value: undefined },
        };
      },
    };
    const out = await onRing(2, async (comm, rank) => {
      const shard = shardDataset(dataset, { comm });
      const seen: number[] = [];
      const it = await shard.iterator();
      for (let r = await it.next(); !r.done; r = await it.next()) seen.push(batches.indexOf(r.value!));
      const model = buildModel(1 + rank);
      model.compile({
        optimizer: new DistributedOptimizer(tf.train.sgd(LR), { comm }),
        loss: 'categoricalCrossentropy',
      });
      await model.fitDataset(shard as never, {
        epochs: 1,
        verbose: 0,
        callbacks: [new BroadcastGlobalVariablesCallback(0, { comm })],
      });
      return { seen, size: shard.size, weights: await weightsOf(model) };
    });
    expect(out.map((o) => o.seen)).toEqual([
      [0, 2, 4, 6],
      [1, 3, 5, 7],
    ]);
    expect(out.map((o) => o.size)).toEqual([4, 4]);
    expect(maxRelativeDifference(out[1].weights, out[0].weights)).toBe(0);
    tf.dispose([x, y, ...batches.flatMap((b) => [b.xs, b.ys])]);
  });
});
