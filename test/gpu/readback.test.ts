/**
 * Latency hiding: DeferredScalars gathers GPU scalars without waiting and
 * reads them with one wait; a read that happens anyway carries them; the
 * single-peer loop waits at most once per 10 steps plus one per evaluation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeImageDataset } from '../../src/data/dataset.ts';
import { trainLocal, type LocalTrainConfig } from '../../src/distributed/train/train-local.ts';
import { trainDistributed } from '../../src/distributed/train/trainer.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { EventBus } from '../../src/core/events.ts';
import { createModel } from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

describe('DeferredScalars', () => {
  it('returns every recorded scalar in record order with one wait, growing past its capacity', async () => {
    const src = gpu.upload(Float32Array.from({ length: 8 }, (_, i) => i + 0.5));
    const sink = new DeferredScalars(gpu, 2);
    const before = gpu.waits;
    const order = [3, 0, 7, 7, 1, 5, 2];
    for (const i of order) sink.record(gpu.commandEncoder(), src, i * 4);
    expect(gpu.waits).toBe(before);
    expect(sink.count).toBe(order.length);
    expect(await sink.collect()).toEqual(order.map((i) => i + 0.5));
    expect(gpu.waits).toBe(before + 1);
    // Nothing pending: no wait at all.
    expect(await sink.collect()).toEqual([]);
    expect(gpu.waits).toBe(before + 1);
    sink.destroy();
    src.destroy();
  });

  it('copies the value as it was when recorded, not when collected', async () => {
    const src = gpu.storage(4);
    const sink = new DeferredScalars(gpu);
    for (const v of [1.25, -2, 40]) {
      gpu.write(src, new Float32Array([v, 0, 0, 0]));
      sink.record(gpu.commandEncoder(), src, 0);
    }
    expect(await sink.collect()).toEqual([1.25, -2, 40]);
    sink.destroy();
    src.destroy();
  });

  it('rides along with a read that happens anyway: collect then needs no wait', async () => {
    const src = gpu.upload(new Float32Array([7, 8, 9, 10]));
    const other = gpu.upload(new Float32Array([1, 2, 3]));
    const sink = new DeferredScalars(gpu);
    sink.record(gpu.commandEncoder(), src, 4);
    sink.record(gpu.commandEncoder(), src, 12);
    const before = gpu.waits;
    expect(Array.from(await gpu.readF32(other, 0, 3))).toEqual([1, 2, 3]);
    expect(gpu.waits).toBe(before + 1);
    sink.record(gpu.commandEncoder(), src, 0);
    // The first two came back with the read; the third needs one wait of its own.
    expect(await sink.collect()).toEqual([8, 10, 7]);
    expect(gpu.waits).toBe(before + 2);
    sink.destroy();
    for (const b of [src, other]) b.destroy();
  });

  it('rejects an offset outside the buffer or not 4-byte aligned, and use after destroy', () => {
    const src = gpu.storage(4);
    const sink = new DeferredScalars(gpu);
    expect(() => sink.record(gpu.commandEncoder(), src, 2)).toThrow(
      /4-byte-aligned position inside a buffer of 16 bytes/,
    );
    expect(() => sink.record(gpu.commandEncoder(), src, 16)).toThrow(/4-byte-aligned/);
    sink.destroy();
    expect(() => sink.record(gpu.commandEncoder(), src, 0)).toThrow(/destroyed/);
    src.destroy();
  });

  it('forwardBackwardDeferred gives the loss forwardBackward returns, and rejects bad input at once', async () => {
    const model = createModel(gpu, { kind: 'mlp', hidden: [8], inputSize: 6, classes: 3, seed: 2 });
    const u = seededUniform(5);
    const x = Float32Array.from({ length: 4 * 6 }, () => u());
    const labels = [0, 2, 1, 2];
    const sink = new DeferredScalars(model.gpu);
    model.forwardBackwardDeferred(x, labels, undefined, sink);
    const waited = await model.forwardBackward(x, labels);
    expect(await sink.collect()).toEqual([waited]);
    expect(() => model.forwardBackwardDeferred(new Float32Array(5), [0], undefined, sink)).toThrow(
      /x has 5 floats but batch 1/,
    );
    expect(() => model.forwardBackwardDeferred(x, [0, 1, 2, 3], undefined, sink)).toThrow(
      /labels must be integers in \[0, 3\)/,
    );
    expect(sink.count).toBe(0);
    sink.destroy();
    model.destroy();
  });
});

/** Four classes of 8×8 images, each lit in its own quadrant, with noise: learnable in a few dozen steps. */
function quadrants(count: number, seed: number) {
  const u = seededUniform(seed);
  const labels = Uint8Array.from({ length: count }, (_, i) => i % 4);
  const images = new Float32Array(count * 64);
  labels.forEach((c, n) => {
    for (let p = 0; p < 64; p++) {
      const quadrant = (Math.floor(p / 32) << 1) | (p % 8 >= 4 ? 1 : 0);
      images[n * 64 + p] = 0.3 * u() + (quadrant === c ? 0.7 : 0);
    }
  });
  return makeImageDataset({ images, labels, height: 8, width: 8, classes: 4 });
}

describe('trainLocal latency hiding', () => {
  const config: LocalTrainConfig = {
    model: 'mlp',
    optimizer: 'sgd',
    epochs: 1,
    batch: 16,
    lr: 0.1,
    momentum: 0.9,
    weightDecay: 0,
    seed: 3,
  };
  const train = quadrants(320, 1); // 20 steps per epoch
  const test = quadrants(200, 2);

  async function run(readEvery: number) {
    const bus = new EventBus();
    const losses: number[] = [];
    bus.on((e) => {
      if (e.type === 'train-step') losses.push(e.loss);
    });
    const result = await trainLocal({ gpu, train, test, config: { ...config, readEvery }, bus });
    return { result, losses };
  }

  it('waits for the GPU at most once per 10 steps plus once per evaluation, with the same losses as waiting every step', async () => {
    const lazy = await run(10);
    expect(lazy.result.steps).toBe(20);
    // 20 steps: 2 loss reads, 1 evaluation.
    expect(lazy.result.gpuWaits).toBeLessThanOrEqual(20 / 10 + 1);
    expect(lazy.result.gpuWaits).toBeGreaterThanOrEqual(2);
    expect(lazy.result.testAccuracy).toBeGreaterThan(0.9);

    const eager = await run(1);
    expect(eager.result.gpuWaits).toBe(20 + 1);
    expect(lazy.losses).toHaveLength(20);
    expect(lazy.losses).toEqual(eager.losses);
    expect(lazy.losses.every(Number.isFinite)).toBe(true);
  });

  it('a distributed step waits for the GPU once: the loss rides on the gradient read', async () => {
    const [comm] = createMemoryRing(1);
    const losses: number[] = [];
    const before = gpu.waits;
    const result = await trainDistributed({
      gpu,
      comm,
      train,
      test,
      config: { ...config, steps: 10 },
      onStep: (s) => losses.push(s.loss),
    });
    const waits = gpu.waits - before;
    comm.close();
    expect(result.steps).toBe(10);
    expect(losses).toHaveLength(10);
    expect(losses.every(Number.isFinite)).toBe(true);
    // 10 gradient reads, plus a few for the start (weights from the root) and the one evaluation; two per step would be
    // 20+.
    expect(waits).toBeGreaterThanOrEqual(10);
    expect(waits).toBeLessThanOrEqual(10 + 5);
  });

  it('reports a diverged run with the step whose loss was not finite', async () => {
    const bad = await trainLocal({ gpu, train, test, config: { ...config, lr: 1e30, momentum: 0 } }).catch(
      (e: Error) => e,
    );
    expect(bad).toBeInstanceOf(Error);
    expect((bad as Error).message).toMatch(
      /the training loss became (NaN|Infinity|-Infinity) at step \d+: the run diverged; lower --lr/,
    );
  });

  it('rejects a readEvery that is not a positive whole number', async () => {
    await expect(trainLocal({ gpu, train, test, config: { ...config, readEvery: 0 } })).rejects.toThrow(
      /readEvery must be a positive whole number/,
    );
  });
});
