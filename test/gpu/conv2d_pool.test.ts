// conv2d and max-pool kernels on a real WebGPU adapter (Node: Dawn + SwiftShader)
// against their CPU references, plus the shape and buffer errors they raise.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, isRingtrainError } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planConv2dBackwardWeight, planConv2dForward } from '../../src/gpu/kernels/conv2d.ts';
import { planMaxPoolForward } from '../../src/gpu/kernels/maxpool.ts';
import { CONV_SHAPES, POOL_SHAPES, convPoolCases } from '../oracles/conv_pool_cases.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

describe('conv2d and max-pool match the CPU reference', () => {
  const cases = convPoolCases();
  it('covers every shape of the grid, pooling with and without fused ReLU and ties', () => {
    expect(cases.length).toBe(CONV_SHAPES.length + POOL_SHAPES.length * 4);
  });
  for (const c of cases) {
    it(c.name, async () => {
      const results = await c.run(gpu);
      expect(results.length).toBeGreaterThan(0);
      for (const r of results) {
        expect(r.count, r.what).toBeGreaterThan(0);
        expect(r.maxError, `${c.name}: ${r.what}`).toBeLessThanOrEqual(r.tolerance);
      }
    });
  }
});

function expectInvalid(f: () => unknown, text: RegExp): void {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  expect(isRingtrainError(caught, ErrorCode.InvalidArgument), String(caught)).toBe(true);
  expect((caught as Error).message).toMatch(text);
}

describe('bad input is refused with a clear error', () => {
  const s = { n: 2, cin: 3, h: 8, w: 8, cout: 4, kh: 3, kw: 3, pad: 1 };
  it('a kernel larger than the padded input', () => {
    const b = gpu.storage(1024);
    expectInvalid(() => planConv2dForward(gpu, { ...s, kh: 11, kw: 11, pad: 0 }, b, b, b, b), /does not fit a 8x8 input/);
  });
  it('non-integer or zero dimensions', () => {
    const b = gpu.storage(1024);
    expectInvalid(() => planConv2dForward(gpu, { ...s, cin: 0 }, b, b, b, b), /cin must be a positive integer/);
    expectInvalid(() => planConv2dForward(gpu, { ...s, pad: 0.5 }, b, b, b, b), /pad must be a non-negative integer/);
    expectInvalid(() => planMaxPoolForward(gpu, { n: 1, c: 1, h: 1, w: 4 }, b, b, b), /at least 2x2/);
  });
  it('a kernel wider than the weight-gradient kernel supports', () => {
    const b = gpu.storage(100_000);
    expectInvalid(() => planConv2dBackwardWeight(gpu, { ...s, h: 20, w: 20, kh: 3, kw: 9, pad: 1 }, b, b, b, b), /up to 8 wide/);
  });
  it('a buffer smaller than the shape needs, named', () => {
    const x = gpu.storage(2 * 3 * 8 * 8);
    const weight = gpu.storage(4 * 3 * 9);
    const bias = gpu.storage(4);
    const yTooSmall = gpu.storage(2 * 4 * 8 * 8 - 8);
    expectInvalid(() => planConv2dForward(gpu, s, x, weight, bias, yTooSmall), /buffer 'y' holds 504 values, the shape needs 512/);
    expectInvalid(() => planConv2dForward(gpu, s, x, { buffer: weight, offset: 16 }, bias, gpu.storage(512)), /buffer 'weight'/);
  });
});
