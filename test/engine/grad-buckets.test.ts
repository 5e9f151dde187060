/**
 * Gradient buckets (src/engine/grad-buckets.ts): how the flat buffer is cut, from the end of the
 * layout backward, and that a bucket read back mid-backward already holds its final gradients,
 * tied weights included (their gradient is final only after the last of their writers).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';
import {
  bucketBytesFor,
  createModel,
  GraphModel,
  planBuckets,
  type BucketRange,
  type Model,
  type ParamEntry,
} from '../../src/engine/index.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { F, Linear, Module, type Tensor } from '../../src/nn/index.ts';

/** Buckets tile [0, flatLength), hold whole tensors, start at the end and are read in order. */
function expectTiling(buckets: readonly BucketRange[], layout: readonly ParamEntry[], flatLength: number): void {
  let end = flatLength;
  let entry = layout.length;
  let after = 0;
  for (const b of buckets) {
    expect(b.offset + b.length).toBe(end);
    expect(b.entries[1]).toBe(entry);
    expect(b.offset).toBe(layout[b.entries[0]].offset);
    expect(b.after).toBeGreaterThanOrEqual(after);
    [end, entry, after] = [b.offset, b.entries[0], b.after];
  }
  expect([end, entry]).toEqual([0, 0]);
}

/** A layout of tensors of these lengths, each at a 64-float offset. */
function layoutOf(lengths: number[]): { layout: ParamEntry[]; flatLength: number } {
  let offset = 0;
  const layout = lengths.map((length, i) => {
    const e = { name: `t${i}`, shape: [length], offset, length };
    offset += Math.ceil(length / 64) * 64;
    return e;
  });
  return { layout, flatLength: offset };
}

describe('planBuckets', () => {
  it('closes a bucket before the tensor that would take it past the size, from the end; padding goes with the tensor before it', () => {
    // Spans in bytes: 1024, 256, 4096, 512 (the 10-float tensor is padded to 64 floats).
    const { layout, flatLength } = layoutOf([256, 10, 1024, 128]);
    const buckets = planBuckets(layout, flatLength, 4096, (i) => [40, 30, 20, 10][i]);
    expect(buckets.map((b) => b.entries)).toEqual([
      [3, 4],
      [2, 3],
      [0, 2],
    ]);
    expect(buckets.map((b) => [b.offset, b.length])).toEqual([
      [1344, 128],
      [320, 1024],
      [0, 320],
    ]);
    expect(buckets.map((b) => b.after)).toEqual([10, 20, 40]);
    expectTiling(buckets, layout, flatLength);
  });

  it("keeps tensors final after the same step (a layer's weight and bias) in one bucket", () => {
    const { layout, flatLength } = layoutOf([256, 10, 1024, 128]);
    expect(planBuckets(layout, flatLength, 4096, (i) => [20, 20, 10, 10][i]).map((b) => b.entries)).toEqual([
      [2, 4],
      [0, 2],
    ]);
    expect(planBuckets(layout, flatLength, 1 << 20, (i) => [20, 20, 10, 10][i]).map((b) => b.entries)).toEqual([
      [0, 4],
    ]);
  });

  it('gives a tensor larger than the size a bucket of its own, and everything one bucket when the size is large', () => {
    const { layout, flatLength } = layoutOf([64, 64, 64]);
    expect(planBuckets(layout, flatLength, 4, (i) => 3 - i).map((b) => b.entries)).toEqual([
      [2, 3],
      [1, 2],
      [0, 1],
    ]);
    expect(planBuckets(layout, flatLength, 1 << 20, (i) => 3 - i).map((b) => b.entries)).toEqual([[0, 3]]);
  });

  it('sizes buckets at 256 KiB, larger for a gradient past 16 of them, and never past the fusion threshold', () => {
    const MiB = 1024 * 1024;
    expect(bucketBytesFor(400 * 1024, 64 * MiB)).toBe(256 * 1024);
    expect(bucketBytesFor(400 * MiB, 64 * MiB)).toBe(25 * MiB);
    expect(bucketBytesFor(400 * MiB, 16 * MiB)).toBe(16 * MiB);
    expect(bucketBytesFor(400 * 1024, 1024)).toBe(1024);
  });

  it('reads a bucket finished early (a tied weight at the end) no sooner than the bucket before it', () => {
    const { layout, flatLength } = layoutOf([64, 64, 64]);
    const buckets = planBuckets(layout, flatLength, 256, (i) => [5, 9, 2][i]);
    expect(buckets.map((b) => b.after)).toEqual([2, 9, 9]);
  });
});

/** x → c → relu → a → relu → a → relu → b: `a` is applied twice, so its gradient has two writers, and c's backward comes after both. */
class Tied extends Module {
  c = new Linear(6, 6);
  a = new Linear(6, 6);
  b = new Linear(6, 3);
  forward(x: Tensor): Tensor {
    return this.b.call(F.relu(this.a.call(F.relu(this.a.call(F.relu(this.c.call(x)))))));
  }
}

function batchOf(model: Model, n: number, seed: number): { x: Float32Array; y: number[] } {
  const u = seededUniform(seed);
  return {
    x: Float32Array.from({ length: n * model.inputSize }, () => u()),
    y: Array.from({ length: n }, () => Math.floor(u() * model.classes)),
  };
}

describe('GraphModel.forwardBackwardBuckets', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  /** Reads every bucket and compares it, bit for bit, with the whole buffer after forwardBackward on the same batch; the loss rides on the last read. */
  async function expectBucketsExact(model: GraphModel, bucketBytes: number, batch: number): Promise<BucketRange[]> {
    const { x, y } = batchOf(model, batch, 7);
    const loss = await model.forwardBackward(x, y);
    const whole = await model.readGrads();
    const sink = new DeferredScalars(gpu);
    const waits = gpu.waits;
    const buckets = model.forwardBackwardBuckets(x, y, undefined, sink, bucketBytes);
    const ranges = model.gradientBuckets(batch, bucketBytes);
    expect(buckets.map((b) => [b.offset, b.length])).toEqual(ranges.map((b) => [b.offset, b.length]));
    expectTiling(ranges, model.layout, model.flatLength);
    for (const b of buckets) expect(await b.ready).toEqual(whole.subarray(b.offset, b.offset + b.length));
    // One wait per bucket, and none more for the loss.
    expect(await sink.collect()).toEqual([loss]);
    expect(gpu.waits - waits).toBe(buckets.length);
    sink.destroy();
    return [...ranges];
  }

  it('mlp: the last layer is a bucket read before the first layer is done, with the final gradients', async () => {
    const model = createModel(gpu, { kind: 'mlp', seed: 3 }) as GraphModel;
    const ranges = await expectBucketsExact(model, 256 * 1024, 8);
    // dense1.* (5 KB), then dense0.* (401 KB): a layer's weight and bias are final together.
    expect(ranges.map((b) => b.entries)).toEqual([
      [2, 4],
      [0, 2],
    ]);
    expect(ranges[0].after).toBeLessThan(ranges[1].after);
    model.destroy();
  });

  it('cnn: one bucket per layer when the size is small, each final when read', async () => {
    const model = createModel(gpu, { kind: 'cnn', seed: 2 }) as GraphModel;
    const ranges = await expectBucketsExact(model, 4, 3);
    expect(ranges.map((b) => b.entries)).toEqual([
      [4, 6],
      [2, 4],
      [0, 2],
    ]);
    model.destroy();
  });

  it("a weight applied twice is read only after its second writer's add", async () => {
    const model = new GraphModel(gpu, {
      identity: { name: 'tied', options: {} },
      module: new Tied(),
      inputShape: [6],
      classes: 3,
      seed: 4,
    });
    expect(model.layout.map((e) => e.name)).toEqual(['c.weight', 'c.bias', 'a.weight', 'a.bias', 'b.weight', 'b.bias']);
    const ranges = await expectBucketsExact(model, 4, 5);
    expect(ranges.map((b) => b.entries)).toEqual([
      [4, 6],
      [2, 4],
      [0, 2],
    ]);
    // a's gradients are final only after the first application's backward, which follows b's and the second's:
    // read after the second's alone, the bucket would not equal the whole buffer's gradients above.
    expect(ranges[1].after).toBeGreaterThan(ranges[0].after);
    model.destroy();
  });
});
