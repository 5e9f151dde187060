/** Gradchecks of matmul (src/nn/ops/matmul) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { matmulOp } from '../../../src/nn/ops/matmul/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: matmulOp, label: 'a[5,7] b[7,3]', inputs: [s(5, 7), s(7, 3)] },
  { op: matmulOp, label: 'a[36,12] b[12,40]', inputs: [s(36, 12), s(12, 40)] },
];
