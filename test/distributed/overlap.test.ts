/**
 * Backward overlapped with the allreduce (src/distributed/reduce/overlap.ts): each gradient bucket is
 * reduced as soon as backward finishes it. With 2 ranks a + b is exact whatever the algorithm and
 * however the buffer is cut, so overlapped and whole-gradient steps must give the same bits. A
 * job whose checks only read takes the overlapped path; one whose doubt rule decides each rank's
 * factor reads the whole gradient first, as does a job that sets `overlap: false`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { DistributedOptimizer } from '../../src/distributed/api/optimizer.ts';
import {
  trainDistributed,
  type DistributedTrainArgs,
  type DistributedTrainConfig,
} from '../../src/distributed/train/trainer.ts';
import { createModel, createOptimizer, type ModelSpec } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

/**
 * Two ranks train `spec` by hand for `steps` steps, each on its own data, with momentum and
 * unequal weights; `bucketBytes` undefined reads the gradient whole. Returns rank 0's weights.
 */
async function trainTwo(spec: ModelSpec, steps: number, bucketBytes: number | undefined): Promise<Float32Array> {
  const comms = createMemoryRing(2);
  const finals = await Promise.all(
    comms.map(async (comm, rank) => {
      const model = createModel(gpu, spec);
      const opt = new DistributedOptimizer(
        comm,
        model,
        createOptimizer(model, { kind: 'sgd', lr: 0.05, momentum: 0.9 }),
      );
      expect(opt.overlapBucketBytes).toBe(256 * 1024);
      const sink = new DeferredScalars(gpu);
      const u = seededUniform(100 + rank);
      for (let step = 0; step < steps; step++) {
        const x = Float32Array.from({ length: 4 * model.inputSize }, () => u());
        const y = Array.from({ length: 4 }, () => Math.floor(u() * model.classes));
        const weight = rank === 0 ? 0.75 : 1.25;
        if (bucketBytes === undefined) {
          model.forwardBackwardDeferred(x, y, undefined, sink);
          await opt.step(undefined, weight, step);
        } else
          await opt.step(undefined, weight, step, model.forwardBackwardBuckets!(x, y, undefined, sink, bucketBytes));
        await sink.collect();
      }
      const params = await model.readParams();
      sink.destroy();
      model.destroy();
      return params;
    }),
  );
  comms.forEach((c) => c.close());
  expect(finals[1]).toEqual(finals[0]);
  return finals[0];
}

describe('DistributedOptimizer with gradient buckets, 2 ranks', () => {
  const specs: ModelSpec[] = [
    { kind: 'mlp', seed: 3, hidden: [64] },
    { kind: 'cnn', seed: 4 },
  ];
  for (const spec of specs) {
    it(`${spec.kind}: one bucket per layer gives the same weights, bit for bit, as the whole gradient`, async () => {
      const whole = await trainTwo(spec, 4, undefined);
      const buckets = await trainTwo(spec, 4, 4);
      expect(buckets).toEqual(whole);
    }, 60_000);
  }
});

/** 64 MNIST digits for training, 32 for the test. */
async function digits() {
  const m = await loadMnist();
  const px = 784;
  const train = makeImageDataset({
    images: m.train.images.slice(0, 64 * px),
    labels: m.train.labels.slice(0, 64),
    height: 28,
    width: 28,
    classes: 10,
  });
  const test = makeImageDataset({
    images: m.test.images.slice(0, 32 * px),
    labels: m.test.labels.slice(0, 32),
    height: 28,
    width: 28,
    classes: 10,
  });
  return { train, test };
}

/** A fixed job's settings as job-config.ts makes them by default: the norm rule only. */
const fixedJob: DistributedTrainConfig = {
  model: 'mlp',
  optimizer: 'sgd',
  epochs: 1,
  steps: 3,
  batch: 8,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  seed: 2,
  guard: { direction: false, doubt: false },
};

/** Trains `config` on `size` memory-linked ranks; each rank's events (rank 0's as `events`) and the final weights. */
async function trainRing(
  size: number,
  config: DistributedTrainConfig,
  extra: (comm: Communicator) => Partial<DistributedTrainArgs> = () => ({}),
) {
  const { train, test } = await digits();
  const comms = createMemoryRing(size);
  const byRank: RingEvent[][] = comms.map(() => []);
  comms.forEach((c) => c.events.on((e) => void (e.rank === c.rank && byRank[c.rank].push(e))));
  let final: TrainingCheckpoint | undefined;
  await Promise.all(
    comms.map((comm) =>
      trainDistributed({ gpu, comm, train, test, config, onCheckpoint: (c) => void (final = c), ...extra(comm) }),
    ),
  );
  comms.forEach((c) => c.close());
  const params = Float32Array.from(Object.values(final!.params).flatMap((t) => Array.from(t.data)));
  return { events: byRank[0], byRank, params };
}

const bucketWaits = (events: RingEvent[]) =>
  events.filter((e): e is Extract<RingEvent, { type: 'gpu-wait' }> => e.type === 'gpu-wait' && e.bucket !== undefined);

describe('which jobs overlap backward with the allreduce', () => {
  it('a fixed job with the default checks reduces its first bucket before its last is read back, to the same weights', async () => {
    const overlapped = await trainRing(2, fixedJob);
    const waits = bucketWaits(overlapped.events);
    // The MLP's last layer (5 KB) and its first (401 KB): two buckets a step.
    expect(waits.map((e) => e.what)).toEqual(
      Array.from({ length: 3 }, () => ['gradients bucket 1/2', 'gradients bucket 2/2']).flat(),
    );
    // The timeline shows the overlap: bucket 1's reduction begins before bucket 2's read-back is over.
    const firstSum = overlapped.events.findIndex((e) => e.type === 'collective-begin' && e.name.endsWith('bucket 1/2'));
    const lastRead = overlapped.events.findIndex((e) => e.type === 'gpu-wait' && e.what === 'gradients bucket 2/2');
    expect(firstSum).toBeGreaterThanOrEqual(0);
    expect(firstSum).toBeLessThan(lastRead);
    // A transform of one rank's gradients (here one that changes nothing) needs its whole gradient first:
    // that rank reads every bucket before reducing any, and reduces the same buckets as the other.
    const mixed = await trainRing(2, fixedJob, (comm) => (comm.rank === 1 ? { transformGradients: () => {} } : {}));
    expect(bucketWaits(mixed.byRank[0]).length).toBe(6);
    const transformed = mixed.byRank[1];
    expect(bucketWaits(transformed).length).toBe(6);
    const lastRead1 = transformed.findIndex((e) => e.type === 'gpu-wait' && e.what === 'gradients bucket 2/2');
    const firstSum1 = transformed.findIndex((e) => e.type === 'collective-begin' && e.name.includes('bucket'));
    expect(firstSum1).toBeGreaterThan(lastRead1);
    expect(mixed.params).toEqual(overlapped.params);
    // The job's setting turns it off: the gradient read whole, one collective, the same bits.
    const off = await trainRing(2, { ...fixedJob, overlap: false });
    expect(bucketWaits(off.events)).toEqual([]);
    // Each step's read-back, then its update's submit (a GPU wait of its own, apart from the ring).
    expect(off.events.filter((e) => e.type === 'gpu-wait').map((e) => (e as { what: string }).what)).toEqual(
      Array.from({ length: 3 }, () => ['gradients', 'update']).flat(),
    );
    expect(off.params).toEqual(overlapped.params);
  }, 60_000);

  it('4 ranks of a fixed job overlap; with the doubt rule they read the whole gradient first', async () => {
    const fixed = await trainRing(4, { ...fixedJob, steps: 2 });
    expect(bucketWaits(fixed.events).length).toBe(4);
    const doubt = await trainRing(4, { ...fixedJob, steps: 2, guard: { direction: false } });
    expect(bucketWaits(doubt.events)).toEqual([]);
    expect(doubt.events.some((e) => e.type === 'collective-begin' && e.name.includes('bucket'))).toBe(false);
  }, 90_000);
});
