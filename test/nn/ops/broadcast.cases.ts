/** Gradchecks of addBroadcast, mul and scale (src/nn/ops/broadcast) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { addBroadcastOp, mulOp, scaleOp } from '../../../src/nn/ops/broadcast/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: addBroadcastOp, label: 'a[2,3,4] + b[3,1]', inputs: [s(2, 3, 4), s(3, 1)] },
  { op: addBroadcastOp, label: 'a[4] − b[2,4] (alpha −1)', inputs: [s(4), s(2, 4)], attrs: { alpha: -1 } },
  { op: mulOp, label: 'a[2,1,4] · b[3,1]', inputs: [s(2, 1, 4), s(3, 1)] },
  { op: scaleOp, label: 'x[3,5] · 0.125', inputs: [s(3, 5)], attrs: { alpha: 0.125 } },
];
