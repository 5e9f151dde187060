/** Gradchecks of softmax (src/nn/ops/softmax) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { softmaxOp } from '../../../src/nn/ops/softmax/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: softmaxOp, label: 'x[5,9]', inputs: [s(5, 9)] },
];
