/**
 * mean and max over the last dimension (src/nn/ops/row-reduce): gradchecks
 * against their f64 oracles. The seeded uniform inputs have no ties, so max's
 * finite differences see one maximum per row.
 */
import { maxOp, meanOp } from '../../../src/nn/ops/row-reduce/index.ts';
import type { OpCase } from '../op-cases.ts';

export const CASES: OpCase[] = [
  { op: meanOp, label: 'x[6,16] → [6,1]', inputs: [{ shape: [6, 16] }] },
  { op: meanOp, label: 'x[2,3,5] → [2,3,1]', inputs: [{ shape: [2, 3, 5] }] },
  { op: meanOp, label: 'x[7] → [1]', inputs: [{ shape: [7] }] },
  { op: maxOp, label: 'x[5,9] → [5,1]', inputs: [{ shape: [5, 9] }] },
  { op: maxOp, label: 'x[2,4,33] → [2,4,1]', inputs: [{ shape: [2, 4, 33] }] },
];
