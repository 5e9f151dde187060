/** mean and max over the last dimension, forward and backward. See shaders/row_reduce.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import {
  checkBindings,
  checkDims,
  chooseRowReduction,
  rowEntry,
  planEntry,
  type Reduction,
} from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('rowReduce', {
  shader: 'row_reduce',
  entryPoints: ['mean_forward', 'mean_backward', 'max_forward', 'max_backward'],
});
defineKernel('rowReduceSubgroups', {
  shader: 'row_reduce+subgroups',
  entryPoints: ['mean_forward_rows', 'max_forward_rows', 'max_backward_rows'],
  requires: 'subgroups',
});

/** The row entry (`rowEntry`); the mean's backward has no subgroup version (it reduces nothing). */
function variant(gpu: Gpu, entry: string, rows: number, reduction?: Reduction) {
  const chosen = chooseRowReduction(gpu, reduction);
  return rowEntry(gpu, 'row_reduce', entry, rows, entry === 'mean_backward' ? 'workgroup' : chosen);
}

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

/** y[r] = mean or max of x[r, ·]. `reduction` forces a variant (default: the Gpu's). */
export function planRowReduceForward(
  gpu: Gpu,
  kind: RowReduceKind,
  x: Binding,
  y: Binding,
  s: RowsShape,
  reduction?: Reduction,
): Dispatch {
  checkBindings(`${kind} forward`, { x: [x, s.rows * s.cols], y: [y, s.rows] }, { ...s });
  const v = variant(gpu, `${kind}_forward`, s.rows, reduction);
  return planEntry(
    gpu,
    v.key,
    v.entry,
    [
      [0, dims(gpu, s)],
      [1, x],
      [2, y],
    ],
    v.groups,
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
  reduction?: Reduction,
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
  const v = variant(gpu, `${kind}_backward`, s.rows, reduction);
  return planEntry(gpu, v.key, v.entry, bindings, v.groups);
}
