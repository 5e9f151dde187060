/** Gradchecks of add (src/nn/ops/add) against the f64 oracle and finite differences. */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { addOp } from '../../../src/nn/ops/add/index.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [{ op: addOp, label: 'a[3,5] b[3,5]', inputs: [s(3, 5), s(3, 5)] }];
