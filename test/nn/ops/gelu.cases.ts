/** Gradchecks of gelu (exact erf form), over a spread of inputs from −7 to 7 (src/nn/ops/gelu) against the f64 oracle and finite differences. */
import { geluOp } from '../../../src/nn/ops/gelu/index.ts';
import type { OpCase } from '../op-cases.ts';

export const CASES: OpCase[] = [
  { op: geluOp, label: 'x[4,70] (erf)', inputs: [{ shape: [4, 70], data: Array.from({ length: 280 }, (_, i) => (i - 140) / 20) }] },
];
