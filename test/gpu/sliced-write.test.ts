/**
 * Gpu.write past WRITE_SLICE_BYTES goes in slices, each submitted before the next is staged (the
 * runtime's staging then never holds the whole write): the bytes land as given, at an offset,
 * after the work recorded before the write and before the work recorded after it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import { WRITE_SLICE_BYTES, type Gpu } from '../../src/gpu/gpu.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

/** Where `got` first differs from `want` (-1: nowhere): one look instead of millions of expects. */
function firstDifference(got: Float32Array, want: Float32Array): number {
  for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) return i;
  return got.length === want.length ? -1 : want.length;
}

describe('Gpu.write in slices', () => {
  it('writes two and a bit slices at an offset, between the copies recorded before and after it', async () => {
    const floats = (2 * WRITE_SLICE_BYTES + 4096) / 4;
    const offset = 5;
    const values = Float32Array.from({ length: floats }, (_, i) => (i % 65_519) + i / floats);
    const target = gpu.storage(floats + offset + 3, 'target');
    const before = gpu.upload(new Float32Array(floats + offset + 3).fill(-1));
    const after = gpu.upload(Float32Array.of(42, 43));
    gpu.commandEncoder().copyBufferToBuffer(before, 0, target, 0, (floats + offset + 3) * 4);
    gpu.write(target, values, offset * 4);
    // Recorded after the write: lands over its last two floats.
    gpu.commandEncoder().copyBufferToBuffer(after, 0, target, (offset + floats - 2) * 4, 8);

    const got = await gpu.readF32(target);
    const want = new Float32Array(floats + offset + 3).fill(-1);
    want.set(values, offset);
    want.set([42, 43], offset + floats - 2);
    expect(firstDifference(got, want)).toBe(-1);
    for (const b of [target, before, after]) b.destroy();
  });
});
