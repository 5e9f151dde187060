/**
 * Gpu.compileAhead: a warm-up's pipelines are built with createComputePipelineAsync, the work
 * tried again after each one it was missing, so the runtime's event loop keeps running between
 * them; what the work throws for any other reason reaches the caller.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
}, 120_000);
afterAll(() => gpu?.destroy());

describe('Gpu.compileAhead', () => {
  it('runs the work until it needs no missing pipeline, building each off the event loop, then the pipelines are cached', async () => {
    const wanted = [
      { key: 'scale', options: {} },
      { key: 'reduce_rows', options: { entryPoint: 'tree' } },
    ];
    const asyncBuilt: string[] = [];
    const device = (gpu as unknown as { device: GPUDevice }).device;
    const createAsync = device.createComputePipelineAsync.bind(device);
    device.createComputePipelineAsync = (d) => {
      asyncBuilt.push(String(d.label));
      return createAsync(d);
    };
    let attempts = 0;
    let ticksBetween = 0;
    const ticker = setInterval(() => ticksBetween++, 1);
    try {
      await gpu.compileAhead(async () => {
        attempts++;
        for (const w of wanted) gpu.pipeline(w.key, w.options);
      });
    } finally {
      clearInterval(ticker);
      device.createComputePipelineAsync = createAsync;
    }
    // One attempt per missing pipeline, and one that finds them all.
    expect(attempts).toBe(wanted.length + 1);
    expect(asyncBuilt).toHaveLength(wanted.length);
    const before = gpu.pipelineCount;
    for (const w of wanted) gpu.pipeline(w.key, w.options);
    expect(gpu.pipelineCount).toBe(before);
    expect(ticksBetween).toBeGreaterThan(0);
  });

  it('passes on what the work throws for another reason, and compiles synchronously again afterwards', async () => {
    await expect(gpu.compileAhead(async () => Promise.reject(new Error('the batch is empty')))).rejects.toThrow(
      'the batch is empty',
    );
    const before = gpu.pipelineCount;
    expect(() => gpu.pipeline('elementwise', { entryPoint: 'add' })).not.toThrow();
    expect(gpu.pipelineCount).toBe(before + 1);
  });
});
