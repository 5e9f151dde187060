/** Gradchecks of dropout, training and evaluation (src/nn/ops/dropout) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { dropoutOp } from '../../../src/nn/ops/dropout/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: dropoutOp, label: 'x[8,32] p 0.25 seed 7', inputs: [s(8, 32)], attrs: { p: 0.25, seed: 7 } },
  { op: dropoutOp, label: 'x[5] evaluation (identity)', inputs: [s(5)], attrs: { p: 0.5, seed: 7, training: false } },
];
