/** mean and max over the last dimension, forward and backward. See shaders/row_reduce.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('rowReduce', {
  shader: 'row_reduce',
  entryPoints: ['mean_forward', 'mean_backward', 'max_forward', 'max_backward'],
});

export type RowReduceKind = 'mean' | 'max';

export interface RowsShape {
  rows: number;
  cols: number;
}

function dims(gpu: Gpu, s: RowsShape): GPUBuffer {
  checkDims('row reduce', { rows: s.rows, cols: s.cols });
  return gpu.uniform(
    [
      ['u32', s.rows],
      ['u32', s.cols],
      ['u32', 0],
      ['u32', 0],
    ],
    'row-reduce-dims',
  );
}

/** y[r] = mean or max of x[r, ·]. */
export function planRowReduceForward(gpu: Gpu, kind: RowReduceKind, x: Binding, y: Binding, s: RowsShape): Dispatch {
  checkBindings(`${kind} forward`, { x: [x, s.rows * s.cols], y: [y, s.rows] }, { ...s });
  return planEntry(
    gpu,
    'row_reduce',
    `${kind}_forward`,
    [
      [0, dims(gpu, s)],
      [1, x],
      [2, y],
    ],
    linearGroups(s.rows, 64),
  );
}

/** dx[r, ·] from dy[r]; max reads the forward input x to find each row's maximum again. */
export function planRowReduceBackward(
  gpu: Gpu,
  kind: RowReduceKind,
  x: Binding,
  dy: Binding,
  dx: Binding,
  s: RowsShape,
): Dispatch {
  checkBindings(`${kind} backward`, { x: [x, s.rows * s.cols], dy: [dy, s.rows], dx: [dx, s.rows * s.cols] }, { ...s });
  const bindings: [number, Binding][] =
    kind === 'max'
      ? [
          [0, dims(gpu, s)],
          [1, x],
          [3, dy],
          [4, dx],
        ]
      : [
          [0, dims(gpu, s)],
          [3, dy],
          [4, dx],
        ];
  return planEntry(gpu, 'row_reduce', `${kind}_backward`, bindings, linearGroups(s.rows, 64));
}
