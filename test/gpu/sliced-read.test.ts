/**
 * Gpu.read past READ_SLICE_BYTES goes in slices straight into one result: the
 * bytes come back as written, a wait per slice, a deferred scalar riding along
 * is delivered, and the pool keeps no staging buffer larger than one slice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import { READ_SLICE_BYTES, type Gpu } from '../../src/gpu/gpu.ts';
import { DeferredScalars } from '../../src/gpu/readback.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

describe('Gpu.read in slices', () => {
  it('reads a buffer of two and a bit slices back whole, one wait a slice, its riders delivered', async () => {
    const floats = (2 * READ_SLICE_BYTES + 4096) / 4;
    const values = new Float32Array(floats);
    for (let i = 0; i < floats; i++) values[i] = (i % 65_521) - i / floats;
    const buffer = gpu.upload(values);
    const scalars = gpu.upload(Float32Array.of(7.25));
    const sink = new DeferredScalars(gpu, 1);
    sink.record(gpu.commandEncoder(), scalars, 0);
    const created = gpu.pool.createdBytes;
    const waits = gpu.waits;

    // An odd offset and length: the last slice is short, the first does not start at 0.
    const offset = 3;
    const got = await gpu.readF32(buffer, offset, floats - offset - 5);
    expect(gpu.waits - waits).toBe(3);
    expect(got.length).toBe(floats - offset - 5);
    let firstDiff = -1;
    for (let i = 0; i < got.length && firstDiff < 0; i++) if (got[i] !== values[offset + i]) firstDiff = i;
    expect(firstDiff).toBe(-1);
    expect(await sink.collect()).toEqual([7.25]);
    // Staging for one full slice, shared by both, and the short last one with the rider: not the whole read.
    expect(gpu.pool.createdBytes - created).toBeLessThanOrEqual(READ_SLICE_BYTES + 4096 + 256);
    sink.destroy();
    scalars.destroy();
    buffer.destroy();
  });
});
