/** Gradchecks of conv2d (src/nn/ops/conv2d) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { conv2dOp } from '../../../src/nn/ops/conv2d/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: conv2dOp, label: 'x[2,3,7,6] W[5,3,3,3] pad 1', inputs: [s(2, 3, 7, 6), s(5, 3, 3, 3), s(5)], attrs: { pad: 1 } },
  { op: conv2dOp, label: 'x[1,2,8,8] W[4,2,5,5] pad 0', inputs: [s(1, 2, 8, 8), s(4, 2, 5, 5), s(4)], attrs: { pad: 0 } },
];
