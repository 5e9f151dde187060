/** Gradchecks of mseLoss (src/nn/ops/mse) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { mseOp } from '../../../src/nn/ops/mse/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: mseOp, label: 'pred[3,4] target[3,4]', inputs: [s(3, 4), s(3, 4)] },
];
