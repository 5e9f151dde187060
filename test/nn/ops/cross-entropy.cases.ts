/** Gradchecks of crossEntropy with ignored targets (src/nn/ops/cross-entropy) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { crossEntropyOp } from '../../../src/nn/ops/cross-entropy/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });
const ids = (data: number[], ...shape: number[]): GradcheckInput => ({ shape, dtype: 'u32', data });

/** Targets for [positions] over `classes`, every `ignoreEvery`-th one ignored (−1). */
function targets(positions: number, classes: number, ignoreEvery: number): GradcheckInput {
  return ids(Array.from({ length: positions }, (_, i) => (i % ignoreEvery === ignoreEvery - 1 ? -1 : (i * 7) % classes)), positions);
}

export const CASES: OpCase[] = [
  { op: crossEntropyOp, label: 'logits[2,6,5] targets[2,6], a third ignored', inputs: [s(2, 6, 5), { ...targets(12, 5, 3), shape: [2, 6] }] },
  { op: crossEntropyOp, label: 'logits[4,27] targets[4], none ignored', inputs: [s(4, 27), targets(4, 27, 100)] },
];
