/** Gradchecks of attention, causal and full (src/nn/ops/attention) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { attentionOp } from '../../../src/nn/ops/attention/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: attentionOp, label: 'qkv[2,5,24] 2 heads causal', inputs: [s(2, 5, 24)], attrs: { heads: 2 } },
  { op: attentionOp, label: 'qkv[1,4,18] 3 heads full', inputs: [s(1, 4, 18)], attrs: { heads: 3, causal: false } },
];
