/** Gradchecks of permute, slice and concat (src/nn/ops/permute) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { concatOp, permuteOp, sliceOp } from '../../../src/nn/ops/permute/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: permuteOp, label: 'x[2,3,4,5] by [0,2,1,3]', inputs: [s(2, 3, 4, 5)], attrs: { perm: [0, 2, 1, 3] } },
  { op: permuteOp, label: 'x[3,4] transposed', inputs: [s(3, 4)], attrs: { perm: [1, 0] } },
  { op: sliceOp, label: 'x[2,9,3] axis 1 [3,7)', inputs: [s(2, 9, 3)], attrs: { axis: 1, start: 3, length: 4 } },
  { op: concatOp, label: '[2,3] [2,1] [2,4] on axis 1', inputs: [s(2, 3), s(2, 1), s(2, 4)], attrs: { axis: 1 } },
];
