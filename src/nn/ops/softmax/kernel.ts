/** Row softmax over the last dimension, forward and backward (from the saved output). See shaders/softmax.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('softmax', { shader: 'softmax', entryPoints: ['forward', 'backward'] });

function dims(gpu: Gpu, rows: number, cols: number): GPUBuffer {
  checkDims('softmax', { rows, cols });
  return gpu.uniform(
    [
      ['u32', rows],
      ['u32', cols],
      ['u32', 0],
      ['u32', 0],
    ],
    'softmax-dims',
  );
}

/** y[r, :] = softmax(x[r, :]) for a rows × cols matrix. */
export function planSoftmaxForward(gpu: Gpu, x: Binding, y: Binding, rows: number, cols: number): Dispatch {
  checkBindings('softmax forward', { x: [x, rows * cols], y: [y, rows * cols] }, { rows, cols });
  return planEntry(
    gpu,
    'softmax',
    'forward',
    [
      [0, dims(gpu, rows, cols)],
      [1, x],
      [2, y],
    ],
    linearGroups(rows, 64),
  );
}

/** dx (=, or += with `accumulate`) y · (dy − Σ dy·y) per row; y is forward's output. */
export function planSoftmaxBackward(
  gpu: Gpu,
  y: Binding,
  dy: Binding,
  dx: Binding,
  rows: number,
  cols: number,
  accumulate = false,
): Dispatch {
  const n = rows * cols;
  checkBindings('softmax backward', { y: [y, n], dy: [dy, n], dx: [dx, n] }, { rows, cols });
  return planEntry(
    gpu,
    'softmax',
    'backward',
    [
      [0, dims(gpu, rows, cols)],
      [3, y],
      [4, dy],
      [5, dx],
    ],
    linearGroups(rows, 64),
    accumulateConstant(accumulate),
  );
}
