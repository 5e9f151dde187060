/**
 * mean and max over the last dimension (src/nn/ops/row-reduce): gradchecks
 * against their f64 oracles. The seeded uniform inputs have no ties, so max's
 * finite differences see one maximum per row; and the kernels, each reduction variant, against them.
 */
import { maxOp, meanOp } from '../../../src/nn/ops/row-reduce/index.ts';
import { planRowReduceBackward, planRowReduceForward } from '../../../src/nn/ops/row-reduce/kernel.ts';
import {
  maxRowsBackwardRef,
  maxRowsRef,
  meanRowsBackwardRef,
  meanRowsRef,
} from '../../../src/nn/ops/row-reduce/reference.ts';
import { draws, type OracleCase, perReduction, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

export const CASES: OpCase[] = [
  { op: meanOp, label: 'x[6,16] → [6,1]', inputs: [{ shape: [6, 16] }] },
  { op: meanOp, label: 'x[2,3,5] → [2,3,1]', inputs: [{ shape: [2, 3, 5] }] },
  { op: meanOp, label: 'x[7] → [1]', inputs: [{ shape: [7] }] },
  { op: maxOp, label: 'x[5,9] → [5,1]', inputs: [{ shape: [5, 9] }] },
  { op: maxOp, label: 'x[2,4,33] → [2,4,1]', inputs: [{ shape: [2, 4, 33] }] },
];

const { rand } = draws('row-reduce');

/** The kernels, forward and backward, against the f64 reference: a workgroup of 64 past one row, and a lone column. */
export const ORACLE_CASES: OracleCase[] = (['mean', 'max'] as const).flatMap((kind) =>
  [
    [1, 1],
    [7, 33],
    [129, 700],
  ].flatMap(([rows, cols]) =>
    perReduction((reduction) => ({
      name: `${kind} over rows rows=${rows} cols=${cols}`,
      run: (gpu) =>
        scoped(gpu, async (t) => {
          const [x, dy] = [rand(rows * cols, 3), rand(rows)];
          const xb = t(gpu.upload(x));
          const [y, dx] = [t(gpu.storage(rows)), t(gpu.storage(rows * cols))];
          gpu.record([
            planRowReduceForward(gpu, kind, xb, y, { rows, cols }, reduction),
            planRowReduceBackward(gpu, kind, xb, t(gpu.upload(dy)), dx, { rows, cols }, reduction),
          ]);
          const [want, wantDx] =
            kind === 'mean'
              ? [meanRowsRef(x, rows, cols), meanRowsBackwardRef(dy, rows, cols)]
              : [maxRowsRef(x, rows, cols), maxRowsBackwardRef(x, dy, rows, cols)];
          return {
            maxAbsErr: Math.max(
              relErr(await gpu.readF32(y, 0, rows), want),
              relErr(await gpu.readF32(dx, 0, rows * cols), wantDx),
            ),
            tol: 1e-6,
          };
        }),
    })),
  ),
);
