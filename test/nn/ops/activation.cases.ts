/** Gradchecks of relu, tanh and geluTanh (src/nn/ops/activation) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { geluTanhOp, reluOp, tanhOp } from '../../../src/nn/ops/activation/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: reluOp, label: 'x[300]', inputs: [s(300)] },
  { op: tanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
  { op: geluTanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
];
