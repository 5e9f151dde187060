/** Row softmax over the last dimension, forward and backward (from the saved output). See shaders/softmax.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import {
  accumulateConstant,
  checkBindings,
  checkDims,
  rowEntry,
  planEntry,
  type Reduction,
} from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('softmax', { shader: 'softmax', entryPoints: ['forward', 'backward'] });
defineKernel('softmaxSubgroups', {
  shader: 'softmax+subgroups',
  entryPoints: ['forward_rows', 'backward_rows'],
  requires: 'subgroups',
});

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

/** y[r, :] = softmax(x[r, :]) for a rows × cols matrix. `reduction` forces a variant (default: the Gpu's). */
export function planSoftmaxForward(
  gpu: Gpu,
  x: Binding,
  y: Binding,
  rows: number,
  cols: number,
  reduction?: Reduction,
): Dispatch {
  checkBindings('softmax forward', { x: [x, rows * cols], y: [y, rows * cols] }, { rows, cols });
  const v = rowEntry(gpu, 'softmax', 'forward', rows, reduction);
  return planEntry(
    gpu,
    v.key,
    v.entry,
    [
      [0, dims(gpu, rows, cols)],
      [1, x],
      [2, y],
    ],
    v.groups,
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
  reduction?: Reduction,
): Dispatch {
  const n = rows * cols;
  checkBindings('softmax backward', { y: [y, n], dy: [dy, n], dx: [dx, n] }, { rows, cols });
  const v = rowEntry(gpu, 'softmax', 'backward', rows, reduction);
  return planEntry(
    gpu,
    v.key,
    v.entry,
    [
      [0, dims(gpu, rows, cols)],
      [3, y],
      [4, dy],
      [5, dx],
    ],
    v.groups,
    accumulateConstant(accumulate),
  );
}
