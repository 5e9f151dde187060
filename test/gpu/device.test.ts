/** The GPU layer: acquiring a device, the no-adapter error, device loss, the shader registry, caches and the buffer pool. */
import { existsSync, readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, isRingtrainError, RingtrainError } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { linearGroups } from '../../src/gpu/gpu.ts';
import { KERNELS, warmUp } from '../../src/gpu/kernels/index.ts';
import '../../src/nn/ops/index.ts';
import { chooseMatmulVariant, planMatmul } from '../../src/gpu/kernels/matmul.ts';
import { hasShader, registerShaders, shaderKeyOf, shaderSource } from '../../src/gpu/shaders.ts';
import { chooseVulkanDriver, SWIFTSHADER_ICD } from '../../src/gpu/device.node.ts';

async function rejection(p: Promise<unknown>): Promise<RingtrainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RingtrainError) return e;
    throw e;
  }
  throw new Error('expected a rejection');
}

describe('acquireGpu', () => {
  it('fails with NoAdapter naming the runtime and what to install when requestAdapter returns null', async () => {
    const fake = { requestAdapter: async () => null } as unknown as GPU;
    const err = await rejection(acquireGpu({ gpu: fake }));
    expect(err.code).toBe(ErrorCode.NoAdapter);
    expect(err.message).toContain('node');
    expect(err.message).toMatch(/chromium|driver/);
    expect(err.detail).toEqual({ runtime: 'node' });
  });

  it('fails with NoAdapter when there is no WebGPU at all or requestAdapter throws', async () => {
    expect((await rejection(acquireGpu({ gpu: null }))).code).toBe(ErrorCode.NoAdapter);
    const throwing = {
      requestAdapter: async () => {
        throw new Error('vulkan exploded');
      },
    } as unknown as GPU;
    const err = await rejection(acquireGpu({ gpu: throwing }));
    expect(err.code).toBe(ErrorCode.NoAdapter);
    expect(err.message).toContain('vulkan exploded');
  });

  it('picks SwiftShader for Dawn only when no driver is chosen and no render node exists', () => {
    const env: Record<string, string | undefined> = { VK_ICD_FILENAMES: '/custom.json' };
    expect(chooseVulkanDriver(env)).toBe('/custom.json');
    const empty: Record<string, string | undefined> = {};
    const chosen = chooseVulkanDriver(empty);
    // CI machines have chromium's SwiftShader and no GPU: there the env var gets set.
    const gpuPresent = existsSync('/dev/dri') && readdirSync('/dev/dri').some((n) => n.startsWith('renderD'));
    const expected = !gpuPresent && existsSync(SWIFTSHADER_ICD) ? SWIFTSHADER_ICD : undefined;
    expect(chosen).toBe(expected);
    expect(empty.VK_ICD_FILENAMES).toBe(expected);
  });
});

describe('Gpu', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu?.destroy());

  it('reports the adapter and runtime', () => {
    expect(gpu.info.runtime).toBe('node');
    expect(gpu.info.description.length).toBeGreaterThan(0);
    expect(typeof gpu.info.isFallbackAdapter).toBe('boolean');
  });

  it('compiles every registered kernel, each with its shader file', () => {
    for (const k of Object.values(KERNELS)) expect(hasShader(k.shader), k.shader).toBe(true);
    warmUp(gpu);
    const before = gpu.pipelineCount;
    warmUp(gpu);
    expect(gpu.pipelineCount).toBe(before);
  });

  it('caches pipelines by key, entry point and override constants', () => {
    const a = gpu.pipeline('matmul', { constants: { TRANS_A: 1 } });
    const b = gpu.pipeline('matmul', { constants: { TRANS_A: 1 } });
    const c = gpu.pipeline('matmul', { constants: { TRANS_A: 0 } });
    expect(a).toBe(b);
    expect(a).not.toBe(c);
  });

  it('reuses pooled buffers and counts every allocation', () => {
    const before = gpu.allocations;
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
    const x = gpu.pool.acquire(1000, usage);
    expect(gpu.allocations).toBe(before + 1);
    gpu.pool.release(x);
    const y = gpu.pool.acquire(1000, usage);
    expect(y).toBe(x);
    expect(gpu.allocations).toBe(before + 1);
    gpu.pool.release(y);
  });

  it('rejects bad shapes with InvalidArgument', () => {
    const buf = gpu.storage(4);
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 0, n: 1, k: 1 })).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidArgument }),
    );
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 2.5, n: 1, k: 1 })).toThrow(/m must be a positive integer/);
    // A forced kernel whose shape rules the shape breaks names them.
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 16, n: 32, k: 4, variant: 'wide' })).toThrow(
      /wide kernel needs .*m ≥ 32/,
    );
    expect(() =>
      planMatmul(gpu, buf, buf, buf, { m: 32, n: 32, k: 4, transA: true, transB: true, variant: 'wide' }),
    ).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument }));
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 4, n: 6, k: 4, variant: 'direct' })).toThrow(
      /direct kernel needs vec4-aligned/,
    );
    buf.destroy();
  });

  it('picks the matmul kernel by adapter and shape', () => {
    const cpu = { info: { isFallbackAdapter: true } } as Gpu;
    const gpuLike = { info: { isFallbackAdapter: false, runtime: 'node' } } as Gpu;
    expect(chooseMatmulVariant(cpu, { m: 1024, n: 1024, k: 1024 })).toBe('wide');
    expect(chooseMatmulVariant(cpu, { m: 784, n: 512, k: 128, transA: true })).toBe('wide');
    expect(chooseMatmulVariant(cpu, { m: 16, n: 32, k: 512 })).toBe('direct'); // m < 32
    expect(chooseMatmulVariant(cpu, { m: 32, n: 128, k: 512 })).toBe('direct'); // too few blocks to fill the SIMD lanes
    expect(chooseMatmulVariant(cpu, { m: 128, n: 12, k: 512 })).toBe('direct'); // n < 32
    expect(chooseMatmulVariant(cpu, { m: 128, n: 10, k: 512 })).toBe('tiled'); // n not a multiple of 4
    expect(chooseMatmulVariant(cpu, { m: 128, n: 512, k: 513 })).toBe('tiled'); // k not a multiple of 4
    expect(chooseMatmulVariant(gpuLike, { m: 2048, n: 2048, k: 2048 })).toBe('blocked');
    expect(chooseMatmulVariant(gpuLike, { m: 1024, n: 1024, k: 1024 })).toBe('tiled'); // 64 tiles
    expect(chooseMatmulVariant(gpuLike, { m: 128, n: 512, k: 784 })).toBe('tiled');
    expect(chooseMatmulVariant(gpuLike, { m: 1024, n: 1024, k: 1024, variant: 'wide' })).toBe('wide');
  });

  it('refuses buffers beyond the adapter limits with InvalidArgument instead of losing the device', async () => {
    expect(() => gpu.storage(gpu.limits.maxBufferSize / 4 + 1024, 'huge')).toThrow(
      /exceeds this adapter's maxBufferSize/,
    );
    expect(gpu.alive).toBe(true);
    const buf = gpu.storage(4);
    const big = { buffer: buf, offset: 0, size: gpu.limits.maxStorageBufferBindingSize + 4 };
    expect(() => planMatmul(gpu, big, buf, buf, { m: 1, n: 1, k: 1 })).toThrow(/maxStorageBufferBindingSize/);
    buf.destroy();
    await gpu.sync();
    expect(gpu.alive).toBe(true);
  });

  it('folds large 1-D dispatches into 2-D', () => {
    expect(linearGroups(10, 256)).toEqual([1, 1, 1]);
    const [x, y] = linearGroups(70_000 * 256, 256);
    expect(x).toBeLessThanOrEqual(65535);
    expect(x * y).toBeGreaterThanOrEqual(70_000);
  });
});

describe('device failures', () => {
  it('turns an uncaptured GPU error into DeviceLost on the next call', async () => {
    const gpu = await acquireGpu();
    // MAP_READ combines only with COPY_DST: this validation error has no error scope, so it is uncaptured.
    gpu.device.createBuffer({ size: 3, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE });
    await gpu.device.queue.onSubmittedWorkDone();
    // The uncaptured-error event comes when the runtime gets to it: wait for it, with a deadline.
    for (const end = Date.now() + 30_000; !gpu.lost && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
    expect(gpu.lost).toBe(true);
    expect(() => gpu.flush()).toThrow(expect.objectContaining({ code: ErrorCode.DeviceLost }));
    gpu.destroy();
  });

  it('turns device loss into DeviceLost on the next call', async () => {
    const gpu = await acquireGpu();
    const buf = gpu.storage(4);
    // destroy() on the GPUDevice (not on our Gpu) is how a test can lose a device.
    gpu.device.destroy();
    await gpu.device.lost;
    await new Promise((r) => setTimeout(r, 0));
    const err = await rejection(gpu.readF32(buf));
    expect(isRingtrainError(err, ErrorCode.DeviceLost)).toBe(true);
    expect(err.message).toMatch(/lost/);
  });
});

describe('shader registry', () => {
  it('registers by path or key and names the fix when a shader is missing', () => {
    expect(shaderKeyOf('../shaders/matmul.wgsl')).toBe('matmul');
    registerShaders({ '../shaders/test_only_probe.wgsl': '// probe' });
    expect(shaderSource('test_only_probe')).toBe('// probe');
    expect(() => shaderSource('no_such_kernel')).toThrow(/registerShaders/);
    expect(() => registerShaders({ 'x.wgsl': 42 as unknown as string })).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidArgument }),
    );
  });
});
