/**
 * gradcheck cases for every registered op (src/nn/ops): forward and backward
 * against the op's f64 CPU oracle, and the oracle's backward against finite
 * differences (src/nn/gradcheck.ts). Runtime-agnostic: they join the oracle
 * list that runs under Node (test/gpu/oracles.test.ts) and Deno
 * (test/deno/run-oracles.ts). test/nn/coverage.test.ts fails when an op has
 * no case here.
 *
 * A case's result is the worst error/tolerance ratio of the three checks
 * (reported as maxAbsErr with tol 1).
 *
 * An op's own test file is `test/nn/ops/<op>.cases.ts`, found here by
 * listing that folder (Node and Deno alike), so a new op adds its cases
 * without editing a list: it exports `CASES` (gradchecks of an op, or of a
 * function of the inputs composed of ops) and may export `ORACLE_CASES`
 * (anything else to compare against an f64 reference).
 */
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { gradcheck, type GradcheckInput } from '../../src/nn/gradcheck.ts';
import type { Op } from '../../src/nn/op.ts';
import * as ops from '../../src/nn/ops/index.ts';
import type { Tensor } from '../../src/nn/tensor.ts';
import type { OracleCase } from '../oracles/dense-cases.ts';
import { NN_OP_CASES } from '../oracles/nn-op-cases.ts';

/** f32 GPU vs f64 oracle (relative to max(1, |reference|)); analytic vs numeric in f64. */
const TOL = { forward: 1e-4, backward: 1e-4, numeric: 1e-4 };

export interface OpCase {
  /** The op, or a function of the input tensors built from ops (then `name` says what it is). */
  op: Op<any> | ((inputs: Tensor[]) => Tensor);
  name?: string;
  label: string;
  inputs: GradcheckInput[];
  attrs?: Record<string, unknown>;
  /** Tolerances other than TOL, where the composition's f32 rounding needs them. */
  tol?: Partial<typeof TOL>;
}

/** The cases each op's own file (test/nn/ops/<op>.cases.ts) exports, in file-name order. */
async function opFolderCases(): Promise<{ cases: OpCase[]; oracles: OracleCase[] }> {
  const dir = fileURLToPath(new URL('./ops/', import.meta.url));
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.cases.ts')).sort() : [];
  const modules = (await Promise.all(files.map((f) => import(`${dir}${f}`)))) as { CASES?: OpCase[]; ORACLE_CASES?: OracleCase[] }[];
  return { cases: modules.flatMap((m) => m.CASES ?? []), oracles: modules.flatMap((m) => m.ORACLE_CASES ?? []) };
}

const folders = await opFolderCases();

/** What a case checks, for its name and for the coverage test. */
export const caseName = (c: OpCase): string => (typeof c.op === 'function' ? (c.name ?? 'composition') : c.op.name);

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const OP_CASES: OpCase[] = [
  { op: ops.linearOp, label: 'x[5,7] W[3,7] b[3]', inputs: [s(5, 7), s(3, 7), s(3)] },
  { op: ops.linearOp, label: 'x[2,3,8] W[36,8] b[36], fused relu', inputs: [s(2, 3, 8), s(36, 8), s(36)], attrs: { relu: true } },
  { op: ops.linearOp, label: 'x[33,64] W[40,64], no bias (wide/direct shapes)', inputs: [s(33, 64), s(40, 64)] },
  { op: ops.matmulOp, label: 'a[5,7] b[7,3]', inputs: [s(5, 7), s(7, 3)] },
  { op: ops.matmulOp, label: 'a[36,12] b[12,40]', inputs: [s(36, 12), s(12, 40)] },
  { op: ops.reluOp, label: 'x[300]', inputs: [s(300)] },
  { op: ops.tanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
  { op: ops.geluTanhOp, label: 'x[4,70]', inputs: [s(4, 70)] },
  { op: ops.addOp, label: 'a[3,5] b[3,5]', inputs: [s(3, 5), s(3, 5)] },
  { op: ops.reshapeOp, label: 'x[2,3,4] → [6,4]', inputs: [s(2, 3, 4)], attrs: { shape: [6, 4] } },
  { op: ops.conv2dOp, label: 'x[2,3,7,6] W[5,3,3,3] pad 1', inputs: [s(2, 3, 7, 6), s(5, 3, 3, 3), s(5)], attrs: { pad: 1 } },
  { op: ops.conv2dOp, label: 'x[1,2,8,8] W[4,2,5,5] pad 0', inputs: [s(1, 2, 8, 8), s(4, 2, 5, 5), s(4)], attrs: { pad: 0 } },
  { op: ops.maxPool2dOp, label: 'x[2,3,6,5]', inputs: [s(2, 3, 6, 5)] },
  { op: ops.maxPool2dOp, label: 'x[2,3,6,6], fused relu', inputs: [s(2, 3, 6, 6)], attrs: { relu: true } },
  ...NN_OP_CASES,
  ...folders.cases,
];

export const OP_ORACLE_CASES: OracleCase[] = [
  ...OP_CASES.map((c, i) => ({
    name: `gradcheck ${caseName(c)} ${c.label}`,
    run: async (gpu: Gpu) => {
      const r = await gradcheck(gpu, c.op, c.inputs, c.attrs ?? {}, { seed: 1000 + i });
      const tol = { ...TOL, ...c.tol };
      return { maxAbsErr: Math.max(r.forward / tol.forward, r.backward / tol.backward, r.numeric / tol.numeric), tol: 1 };
    },
  })),
  ...folders.oracles,
];
