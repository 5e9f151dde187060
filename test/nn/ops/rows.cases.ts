/** Gradchecks of rows (src/nn/ops/rows): the first n rows, and every row (a plain copy). */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { rowsOp } from '../../../src/nn/ops/rows/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  // The unread rows 3..6 must come back with a zero gradient.
  { op: rowsOp, label: 'x[7,5] first 3 rows', inputs: [s(7, 5)], attrs: { rows: 3 } },
  { op: rowsOp, label: 'x[4,2,3] all 4 rows', inputs: [s(4, 2, 3)], attrs: { rows: 4 } },
];
