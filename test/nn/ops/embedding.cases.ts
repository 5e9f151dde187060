/** Gradchecks of embedding (repeated ids accumulate) (src/nn/ops/embedding) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { embeddingOp } from '../../../src/nn/ops/embedding/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });
const ids = (data: number[], ...shape: number[]): GradcheckInput => ({ shape, dtype: 'u32', data });

export const CASES: OpCase[] = [
  { op: embeddingOp, label: 'ids[2,5] (repeats) weight[4,3]', inputs: [ids([0, 3, 3, 1, 0, 2, 3, 3, 1, 0], 2, 5), s(4, 3)] },
];
