/**
 * gradcheck cases for every registered op (src/nn/ops): forward and backward
 * against the op's f64 CPU oracle, and the oracle's backward against finite
 * differences (src/nn/gradcheck.ts). Runtime-agnostic: they join the oracle
 * list that runs under Node (test/gpu/oracles.test.ts) and Deno
 * (test/deno/run-oracles.ts).
 *
 * Each op's cases are in its own file, `test/nn/ops/<op>.cases.ts`, found
 * here by listing that folder (Node and Deno alike), so a new op adds its
 * cases without editing a list: the file exports `CASES` (gradchecks of an
 * op, or of a function of the inputs composed of ops) and may export
 * `ORACLE_CASES` (anything else to compare against an f64 reference).
 * test/nn/coverage.test.ts fails when a registered op has no gradcheck.
 *
 * A case's result is the worst error/tolerance ratio of the three checks
 * (reported as maxAbsErr with tol 1).
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { gradcheck, type GradcheckInput } from '../../src/nn/gradcheck.ts';
import type { Op } from '../../src/nn/op.ts';
import type { Tensor } from '../../src/nn/tensor.ts';
import type { OracleCase } from '../oracles/dense-cases.ts';

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
  const files = readdirSync(dir).filter((f) => f.endsWith('.cases.ts')).sort();
  const modules = (await Promise.all(files.map((f) => import(`${dir}${f}`)))) as { CASES?: OpCase[]; ORACLE_CASES?: OracleCase[] }[];
  return { cases: modules.flatMap((m) => m.CASES ?? []), oracles: modules.flatMap((m) => m.ORACLE_CASES ?? []) };
}

const folders = await opFolderCases();

/** What a case checks, for its name and for the coverage test. */
export const caseName = (c: OpCase): string => (typeof c.op === 'function' ? (c.name ?? 'composition') : c.op.name);

/** Every op's gradchecks, from its own file. */
export const OP_CASES: OpCase[] = folders.cases;

/** A seed from the case's name, so that adding or reordering cases draws no other case's inputs anew. */
function seedOf(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return 1000 + (h % 1_000_000);
}

export const OP_ORACLE_CASES: OracleCase[] = [
  ...OP_CASES.map((c) => ({
    name: `gradcheck ${caseName(c)} ${c.label}`,
    run: async (gpu: Gpu) => {
      const r = await gradcheck(gpu, c.op, c.inputs, c.attrs ?? {}, { seed: seedOf(`${caseName(c)} ${c.label}`) });
      const tol = { ...TOL, ...c.tol };
      return { maxAbsErr: Math.max(r.forward / tol.forward, r.backward / tol.backward, r.numeric / tol.numeric), tol: 1 };
    },
  })),
  ...folders.oracles,
];
