/** Gradchecks of maxPool2d (optional fused ReLU in front) (src/nn/ops/maxpool) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { maxPool2dOp } from '../../../src/nn/ops/maxpool/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: maxPool2dOp, label: 'x[2,3,6,5]', inputs: [s(2, 3, 6, 5)] },
  { op: maxPool2dOp, label: 'x[2,3,6,6], fused relu', inputs: [s(2, 3, 6, 6)], attrs: { relu: true } },
];
