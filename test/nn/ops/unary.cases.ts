/**
 * exp and rsqrt (src/nn/ops/unary): gradchecks against their f64 oracles.
 * rsqrt's inputs are kept in [0.25, 2] so that finite differences are not
 * taken next to the pole at −ε.
 */
import { expOp, rsqrtOp } from '../../../src/nn/ops/unary/index.ts';
import type { OpCase } from '../op-cases.ts';

const spread = (n: number, lo: number, hi: number): number[] =>
  Array.from({ length: n }, (_, i) => lo + ((hi - lo) * ((i * 37) % n)) / (n - 1));

export const CASES: OpCase[] = [
  { op: expOp, label: 'x[4,70]', inputs: [{ shape: [4, 70] }] },
  { op: expOp, label: 'x[300] in [−4, 4]', inputs: [{ shape: [300], data: spread(300, -4, 4) }] },
  { op: rsqrtOp, label: 'x[4,70] in [0.25, 2]', inputs: [{ shape: [4, 70], data: spread(280, 0.25, 2) }] },
  {
    op: rsqrtOp,
    label: 'x[3,33] in [0.25, 2], eps 1e-5',
    inputs: [{ shape: [3, 33], data: spread(99, 0.25, 2) }],
    attrs: { eps: 1e-5 },
  },
];
