/**
 * Seeded inverted dropout; the mask is a hash of (seed, step, index), never
 * stored, and the step counter lives in a GPU buffer. See shaders/dropout.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('dropout', { shader: 'dropout', entryPoints: ['advance', 'forward', 'backward'] });

export interface DropoutOptions {
  n: number;
  /** Probability of zeroing an element, in [0, 1). */
  p: number;
  /** u32 seed; the same seed and step give the same mask in every runtime. */
  seed: number;
}

/** Elements are dropped when their 32-bit hash is below this. */
export function dropoutThreshold(p: number): number {
  return Math.min(Math.floor(p * 2 ** 32), 2 ** 32 - 1);
}

function dims(gpu: Gpu, o: DropoutOptions): GPUBuffer {
  checkDims('dropout', { n: o.n });
  if (!(o.p >= 0 && o.p < 1)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `dropout: p must be in [0, 1), got ${o.p}`, { p: o.p });
  }
  if (!Number.isInteger(o.seed) || o.seed < 0 || o.seed >= 2 ** 32) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `dropout: seed must be an integer in [0, 2^32), got ${o.seed}`,
      { seed: o.seed },
    );
  }
  return gpu.uniform(
    [
      ['u32', o.n],
      ['u32', dropoutThreshold(o.p)],
      ['f32', 1 / (1 - o.p)],
      ['u32', o.seed],
    ],
    'dropout-dims',
  );
}

/** state[0] += 1: record once per training step, before the forward dispatch. */
export function planDropoutAdvance(gpu: Gpu, state: Binding): Dispatch {
  checkBindings('dropout advance', { state: [state, 1] }, {});
  return planEntry(gpu, 'dropout', 'advance', [[1, state]], [1]);
}

/** y = x · mask / (1 − p), mask from (seed, state[0]). */
export function planDropoutForward(gpu: Gpu, o: DropoutOptions, state: Binding, x: Binding, y: Binding): Dispatch {
  checkBindings('dropout forward', { state: [state, 1], x: [x, o.n], y: [y, o.n] }, { n: o.n });
  return planEntry(
    gpu,
    'dropout',
    'forward',
    [
      [0, dims(gpu, o)],
      [1, state],
      [2, x],
      [3, y],
    ],
    linearGroups(o.n, 256),
  );
}

/** dx (=, or += with `accumulate`) dy · mask / (1 − p), with forward's mask (same seed, same state[0]). */
export function planDropoutBackward(
  gpu: Gpu,
  o: DropoutOptions,
  state: Binding,
  dy: Binding,
  dx: Binding,
  accumulate = false,
): Dispatch {
  checkBindings('dropout backward', { state: [state, 1], dy: [dy, o.n], dx: [dx, o.n] }, { n: o.n });
  return planEntry(
    gpu,
    'dropout',
    'backward',
    [
      [0, dims(gpu, o)],
      [1, state],
      [4, dy],
      [5, dx],
    ],
    linearGroups(o.n, 256),
    accumulateConstant(accumulate),
  );
}
