/** Gradchecks of layerNorm (src/nn/ops/layernorm) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { layerNormOp } from '../../../src/nn/ops/layernorm/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: layerNormOp, label: 'x[6,16] w[16] b[16]', inputs: [s(6, 16), s(16), s(16)] },
  { op: layerNormOp, label: 'x[2,3,5] w[5] b[5], eps 1e-3', inputs: [s(2, 3, 5), s(5), s(5)], attrs: { eps: 1e-3 } },
];
