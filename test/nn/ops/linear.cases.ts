/** Gradchecks of linear (x·Wᵀ + b, optional fused ReLU) (src/nn/ops/linear) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { linearOp } from '../../../src/nn/ops/linear/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: linearOp, label: 'x[5,7] W[3,7] b[3]', inputs: [s(5, 7), s(3, 7), s(3)] },
  {
    op: linearOp,
    label: 'x[2,3,8] W[36,8] b[36], fused relu',
    inputs: [s(2, 3, 8), s(36, 8), s(36)],
    attrs: { relu: true },
  },
  { op: linearOp, label: 'x[33,64] W[40,64], no bias (wide/direct shapes)', inputs: [s(33, 64), s(40, 64)] },
];
