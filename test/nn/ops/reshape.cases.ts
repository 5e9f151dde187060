/** Gradchecks of reshape (src/nn/ops/reshape) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { reshapeOp } from '../../../src/nn/ops/reshape/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: reshapeOp, label: 'x[2,3,4] → [6,4]', inputs: [s(2, 3, 4)], attrs: { shape: [6, 4] } },
];
