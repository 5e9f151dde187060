// conv2d and max-pool: the oracle grid is registered in the shared list, and
// the shape and buffer errors the kernels raise (on a real adapter).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, isRingtrainError } from '../../src/core/errors.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { planConv2dBackwardWeight, planConv2dForward } from '../../src/nn/ops/conv2d/kernel.ts';
import { planMaxPoolForward } from '../../src/nn/ops/maxpool/kernel.ts';
import { ORACLE_CASES } from '../oracles/cases.ts';
import { CNN_CASES } from '../oracles/cnn-cases.ts';
import { CONV_SHAPES, ORACLE_CASES as CONV_CASES } from '../nn/ops/conv2d.cases.ts';
import { ORACLE_CASES as POOL_CASES, POOL_SHAPES } from '../nn/ops/maxpool.cases.ts';

let gpu: Gpu;
beforeAll(async () => {
  gpu = await acquireGpu();
});
afterAll(() => gpu?.destroy());

describe('conv2d and max-pool oracle cases', () => {
  // The cases themselves (in the ops' files, test/nn/ops/conv2d.cases.ts and
  // maxpool.cases.ts) run in the shared oracle list, under Node
  // (test/gpu/oracles.test.ts) and Deno (test/deno/oracles.test.ts).
  it('cover every shape of the grid, pooling with and without fused ReLU and ties, and the whole CNN', () => {
    expect(CONV_CASES.length).toBe(CONV_SHAPES.length);
    expect(POOL_CASES.length).toBe(POOL_SHAPES.length * 4);
    const names = [...CONV_CASES, ...POOL_CASES].map((c) => c.name);
    const shared = new Set(ORACLE_CASES.map((c) => c.name));
    for (const name of [...names, ...CNN_CASES.map((c) => c.name)]) expect(shared.has(name), name).toBe(true);
  });
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
    expectInvalid(
      () => planConv2dForward(gpu, { ...s, kh: 11, kw: 11, pad: 0 }, b, b, b, b),
      /does not fit a 8x8 input/,
    );
  });
  it('non-integer or zero dimensions', () => {
    const b = gpu.storage(1024);
    expectInvalid(() => planConv2dForward(gpu, { ...s, cin: 0 }, b, b, b, b), /cin must be a positive integer/);
    expectInvalid(() => planConv2dForward(gpu, { ...s, pad: 0.5 }, b, b, b, b), /pad must be a non-negative integer/);
    expectInvalid(() => planMaxPoolForward(gpu, { n: 1, c: 1, h: 1, w: 4 }, b, b, b), /at least 2x2/);
  });
  it('a kernel wider than the weight-gradient kernel supports', () => {
    const b = gpu.storage(100_000);
    expectInvalid(
      () => planConv2dBackwardWeight(gpu, { ...s, h: 20, w: 20, kh: 3, kw: 9, pad: 1 }, b, b, b, b),
      /up to 8 wide/,
    );
  });
  it('a buffer smaller than the shape needs, named', () => {
    const x = gpu.storage(2 * 3 * 8 * 8);
    const weight = gpu.storage(4 * 3 * 9);
    const bias = gpu.storage(4);
    const yTooSmall = gpu.storage(2 * 4 * 8 * 8 - 8);
    expectInvalid(
      () => planConv2dForward(gpu, s, x, weight, bias, yTooSmall),
      /buffer 'y' holds 504 values, the shape needs 512/,
    );
    expectInvalid(
      () => planConv2dForward(gpu, s, x, { buffer: weight, offset: 16 }, bias, gpu.storage(512)),
      /buffer 'weight'/,
    );
  });
});
