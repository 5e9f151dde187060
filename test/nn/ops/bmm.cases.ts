/** Gradchecks of bmm, batched and shared, with transposes (src/nn/ops/bmm) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { bmmOp } from '../../../src/nn/ops/bmm/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: bmmOp, label: 'a[3,4,5] b[3,5,2]', inputs: [s(3, 4, 5), s(3, 5, 2)] },
  { op: bmmOp, label: 'aᵀ[2,5,4] bᵀ[2,3,5]', inputs: [s(2, 5, 4), s(2, 3, 5)], attrs: { transA: true, transB: true } },
  { op: bmmOp, label: 'a[3,4,5] shared b[5,6]', inputs: [s(3, 4, 5), s(5, 6)] },
  { op: bmmOp, label: 'a[2,4,5] shared bᵀ[6,5]', inputs: [s(2, 4, 5), s(6, 5)], attrs: { transB: true } },
];
