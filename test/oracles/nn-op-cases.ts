/**
 * gradcheck cases (src/nn/gradcheck.ts: GPU forward and backward against the
 * op's f64 oracle, the oracle's backward against finite differences) for the
 * ops built on the kernels of nn-cases.ts and tensor-cases.ts. They join
 * OP_CASES in test/nn/op-cases.ts, which the coverage test checks every
 * registered op against, and run under Node and Deno with the other oracles.
 */
import type { GradcheckInput } from '../../src/nn/gradcheck.ts';
import type { Op } from '../../src/nn/op.ts';
import * as ops from '../../src/nn/ops/index.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });
const ids = (data: number[], ...shape: number[]): GradcheckInput => ({ shape, dtype: 'u32', data });

/** Targets for [positions] over `classes`, every `ignoreEvery`-th one ignored (−1). */
function targets(positions: number, classes: number, ignoreEvery: number): GradcheckInput {
  return ids(Array.from({ length: positions }, (_, i) => (i % ignoreEvery === ignoreEvery - 1 ? -1 : (i * 7) % classes)), positions);
}

export const NN_OP_CASES: { op: Op<any>; label: string; inputs: GradcheckInput[]; attrs?: Record<string, unknown> }[] = [
  { op: ops.geluOp, label: 'x[4,70] (erf)', inputs: [{ shape: [4, 70], data: Array.from({ length: 280 }, (_, i) => (i - 140) / 20) }] },
  { op: ops.layerNormOp, label: 'x[6,16] w[16] b[16]', inputs: [s(6, 16), s(16), s(16)] },
  { op: ops.layerNormOp, label: 'x[2,3,5] w[5] b[5], eps 1e-3', inputs: [s(2, 3, 5), s(5), s(5)], attrs: { eps: 1e-3 } },
  { op: ops.softmaxOp, label: 'x[5,9]', inputs: [s(5, 9)] },
  { op: ops.crossEntropyOp, label: 'logits[2,6,5] targets[2,6], a third ignored', inputs: [s(2, 6, 5), { ...targets(12, 5, 3), shape: [2, 6] }] },
  { op: ops.crossEntropyOp, label: 'logits[4,27] targets[4], none ignored', inputs: [s(4, 27), targets(4, 27, 100)] },
  { op: ops.embeddingOp, label: 'ids[2,5] (repeats) weight[4,3]', inputs: [ids([0, 3, 3, 1, 0, 2, 3, 3, 1, 0], 2, 5), s(4, 3)] },
  { op: ops.attentionOp, label: 'qkv[2,5,24] 2 heads causal', inputs: [s(2, 5, 24)], attrs: { heads: 2 } },
  { op: ops.attentionOp, label: 'qkv[1,4,18] 3 heads full', inputs: [s(1, 4, 18)], attrs: { heads: 3, causal: false } },
  { op: ops.bmmOp, label: 'a[3,4,5] b[3,5,2]', inputs: [s(3, 4, 5), s(3, 5, 2)] },
  { op: ops.bmmOp, label: 'aᵀ[2,5,4] bᵀ[2,3,5]', inputs: [s(2, 5, 4), s(2, 3, 5)], attrs: { transA: true, transB: true } },
  { op: ops.bmmOp, label: 'a[3,4,5] shared b[5,6]', inputs: [s(3, 4, 5), s(5, 6)] },
  { op: ops.bmmOp, label: 'a[2,4,5] shared bᵀ[6,5]', inputs: [s(2, 4, 5), s(6, 5)], attrs: { transB: true } },
  { op: ops.addBroadcastOp, label: 'a[2,3,4] + b[3,1]', inputs: [s(2, 3, 4), s(3, 1)] },
  { op: ops.addBroadcastOp, label: 'a[4] − b[2,4] (alpha −1)', inputs: [s(4), s(2, 4)], attrs: { alpha: -1 } },
  { op: ops.mulOp, label: 'a[2,1,4] · b[3,1]', inputs: [s(2, 1, 4), s(3, 1)] },
  { op: ops.scaleOp, label: 'x[3,5] · 0.125', inputs: [s(3, 5)], attrs: { alpha: 0.125 } },
  { op: ops.permuteOp, label: 'x[2,3,4,5] by [0,2,1,3]', inputs: [s(2, 3, 4, 5)], attrs: { perm: [0, 2, 1, 3] } },
  { op: ops.permuteOp, label: 'x[3,4] transposed', inputs: [s(3, 4)], attrs: { perm: [1, 0] } },
  { op: ops.sliceOp, label: 'x[2,9,3] axis 1 [3,7)', inputs: [s(2, 9, 3)], attrs: { axis: 1, start: 3, length: 4 } },
  { op: ops.concatOp, label: '[2,3] [2,1] [2,4] on axis 1', inputs: [s(2, 3), s(2, 1), s(2, 4)], attrs: { axis: 1 } },
  { op: ops.dropoutOp, label: 'x[8,32] p 0.25 seed 7', inputs: [s(8, 32)], attrs: { p: 0.25, seed: 7 } },
  { op: ops.dropoutOp, label: 'x[5] evaluation (identity)', inputs: [s(5)], attrs: { p: 0.5, seed: 7, training: false } },
  { op: ops.mseOp, label: 'pred[3,4] target[3,4]', inputs: [s(3, 4), s(3, 4)] },
];
