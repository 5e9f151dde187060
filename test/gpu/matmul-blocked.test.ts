/**
 * The register-blocked matmul for hardware adapters (matmul_tiled_blocked.wgsl),
 * forced on this machine's software adapter against the CPU oracle, and the
 * variant table that picks it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { blockedFits, chooseMatmulVariant, MATMUL_TABLE, planMatmul } from '../../src/gpu/kernels/matmul.ts';
import { seededUniform } from '../../src/engine/random.ts';
import { matmulRef, maxAbsDiff } from '../oracles/reference.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

const u = seededUniform(11);
const rand = (n: number) => Float32Array.from({ length: n }, () => u() * 2 - 1);

/**
 * Partial 128×128 tiles in both directions, several workgroups, k not a
 * multiple of the 8-deep slice, one row, one quad of columns.
 */
const shapes: [number, number, number][] = [
  [1, 4, 4],
  [5, 132, 12],
  [130, 36, 20],
  [129, 260, 36],
  [200, 8, 132],
];
const transposes: [boolean, boolean][] = [
  [false, false],
  [true, false],
  [false, true],
  [true, true],
];

describe('matmul blocked (128×128 tiles, 8×8 per invocation)', () => {
  for (const [m, n, k] of shapes) {
    for (const [ta, tb] of transposes) {
      const shape = { m, n, k, transA: ta, transB: tb };
      if (!blockedFits(shape)) continue;
      it(`${ta ? 'Aᵀ' : 'A'}·${tb ? 'Bᵀ' : 'B'} m=${m} n=${n} k=${k} matches the CPU oracle${m % 2 ? ' with bias + ReLU' : ''}`, async () => {
        const A = rand(m * k);
        const B = rand(k * n);
        const bias = rand(n);
        const relu = m % 2 === 1;
        const bufs = [gpu.upload(A), gpu.upload(B), gpu.storage(m * n), gpu.upload(bias)];
        const [a, b, c, bb] = bufs;
        // Poison C: every entry must be written.
        gpu.write(c, new Float32Array(m * n).fill(Number.NaN));
        gpu.record(planMatmul(gpu, a, b, c, { ...shape, variant: 'blocked', bias: relu ? bb : undefined, relu }));
        const got = await gpu.readF32(c, 0, m * n);
        const want = matmulRef(A, B, m, n, k, ta, tb).map((v, i) => (relu ? Math.max(0, v + bias[i % n]) : v));
        expect(maxAbsDiff(got, want)).toBeLessThanOrEqual(2e-7 * k + 2e-6);
        for (const x of bufs) x.destroy();
      });
    }
  }

  it('refuses shapes it cannot load as vec4 when forced, naming the rule', () => {
    const buf = gpu.storage(4);
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 8, n: 6, k: 4, variant: 'blocked' })).toThrow(
      /blocked kernel needs n a multiple of 4/,
    );
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 6, n: 8, k: 4, transA: true, variant: 'blocked' })).toThrow(
      expect.objectContaining({ code: ErrorCode.InvalidArgument }),
    );
    expect(() => planMatmul(gpu, buf, buf, buf, { m: 8, n: 8, k: 5, variant: 'blocked' })).toThrow(/k for A and Bᵀ/);
    buf.destroy();
  });
});

describe('the matmul variant table', () => {
  const cpu = { info: { isFallbackAdapter: true } } as Gpu;
  it('walks its tiles in bands (groupRows) and still writes every entry right, with a last band shorter than the rest', async () => {
    const [m, n, k] = [300, 520, 12]; // 3 × 5 tiles; bands of 2 tile rows leave one of 1
    const A = rand(m * k);
    const B = rand(k * n);
    const bufs = [gpu.upload(A), gpu.upload(B), gpu.storage(m * n)];
    const [a, b, c] = bufs;
    gpu.write(c, new Float32Array(m * n).fill(Number.NaN));
    gpu.record(planMatmul(gpu, a, b, c, { m, n, k, variant: 'blocked', groupRows: 2 }));
    const got = await gpu.readF32(c, 0, m * n);
    expect(maxAbsDiff(got, matmulRef(A, B, m, n, k, false, false))).toBeLessThanOrEqual(2e-7 * k + 2e-6);
    for (const x of bufs) x.destroy();
  });

  const hardware = { info: { isFallbackAdapter: false, runtime: 'node' } } as Gpu;
  const wgpuHardware = { info: { isFallbackAdapter: false, runtime: 'deno' } } as Gpu;

  it('picks the blocked kernel on hardware adapters for big aligned shapes, 64×64 tiles otherwise', () => {
    expect(chooseMatmulVariant(hardware, { m: 2048, n: 2048, k: 2048 })).toBe('blocked');
    expect(chooseMatmulVariant(hardware, { m: 4096, n: 4096, k: 4096, transA: true, transB: true })).toBe('blocked');
    expect(chooseMatmulVariant(hardware, { m: 1024, n: 1024, k: 1024 })).toBe('tiled'); // 64 tiles: tiled measured faster on an H100
    expect(chooseMatmulVariant(hardware, { m: 2048, n: 1024, k: 1024 })).toBe('blocked'); // 128 tiles
    expect(chooseMatmulVariant(wgpuHardware, { m: 2048, n: 2048, k: 2048 })).toBe('tiled'); // Deno's wgpu runs the blocked kernel 16x slower
    expect(chooseMatmulVariant(hardware, { m: 128, n: 512, k: 784 })).toBe('tiled'); // 4 tiles: too few to fill a GPU
    expect(chooseMatmulVariant(hardware, { m: 2048, n: 2046, k: 2048 })).toBe('tiled'); // n not a multiple of 4
    expect(chooseMatmulVariant(hardware, { m: 2048, n: 2048, k: 2047 })).toBe('tiled'); // A's rows not vec4
    expect(chooseMatmulVariant(hardware, { m: 2047, n: 2048, k: 2048, transA: true })).toBe('tiled'); // Aᵀ's rows not vec4
  });

  it('never picks the blocked kernel on a CPU adapter, and a forced variant wins', () => {
    for (const n of [256, 1024, 4096]) expect(chooseMatmulVariant(cpu, { m: n, n, k: n })).toBe('wide');
    expect(chooseMatmulVariant(cpu, { m: 1024, n: 1024, k: 1024, variant: 'blocked' })).toBe('blocked');
    expect(chooseMatmulVariant(hardware, { m: 1024, n: 1024, k: 1024, variant: 'tiled' })).toBe('tiled');
    // Every adapter kind ends in a catch-all row, so the table always answers.
    for (const kind of ['cpu', 'gpu'])
      expect(
        MATMUL_TABLE.filter((r) => r.adapter === kind)
          .at(-1)!
          .when({ m: 3, n: 5, k: 7 }),
      ).toBe(true);
  });
});
