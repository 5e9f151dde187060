/**
 * Every op's oracle cases: the gradchecks of every registered op (src/nn/ops),
 * forward and backward against the op's f64 CPU oracle and the oracle's
 * backward against finite differences (src/nn/gradcheck.ts), and the op's
 * other oracle cases. Runtime-agnostic: they join the oracle list that runs
 * under Node (test/gpu/oracles.test.ts) and Deno (test/deno/run-oracles.ts). *
 * Each op's cases are in its own file, `test/nn/ops/<op>.cases.ts`, found
 * here by listing that folder (Node and Deno alike: neither can glob imports),
 * so a new op adds its cases without editing a list: the file exports `CASES`
 * (gradchecks of an op, or of a function of the inputs composed of ops) and
 * `ORACLE_CASES` where it has more to check: its kernels run on the GPU
 * against its f64 reference over a grid of shapes, or anything else compared
 * with an f64 reference (test/oracles/oracle-case.ts has the helpers).
 * test/nn/coverage.test.ts fails when a registered op has no gradcheck.
 *
 * A gradcheck's result is the worst error/tolerance ratio of its three
 * checks (reported as maxAbsErr with tol 1).
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { gradcheck, type GradcheckInput } from '../../src/nn/gradcheck.ts';
import type { Op } from '../../src/nn/op.ts';
import type { Tensor } from '../../src/nn/tensor.ts';
import { type OracleCase, seedOf } from '../oracles/oracle-case.ts';

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

/** What one op's file (test/nn/ops/<op>.cases.ts) exports. */
interface OpCaseFile {
  CASES?: OpCase[];
  ORACLE_CASES?: OracleCase[];
}

/** Every op's file, in file-name order. */
async function opCaseFiles(): Promise<OpCaseFile[]> {
  const dir = fileURLToPath(new URL('./ops/', import.meta.url));
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cases.ts'))
    .sort();
  return (await Promise.all(files.map((f) => import(`${dir}${f}`)))) as OpCaseFile[];
}

const files = await opCaseFiles();

/** What a case checks, for its name and for the coverage test. */
export const caseName = (c: OpCase): string => (typeof c.op === 'function' ? (c.name ?? 'composition') : c.op.name);

/** Every op's gradchecks, from its own file. */
export const OP_CASES: OpCase[] = files.flatMap((f) => f.CASES ?? []);

/** A gradcheck as an oracle case; its inputs are seeded by its name, so adding or reordering cases draws no other case's inputs anew. */
function gradcheckCase(c: OpCase): OracleCase {
  return {
    name: `gradcheck ${caseName(c)} ${c.label}`,
    run: async (gpu: Gpu) => {
      const r = await gradcheck(gpu, c.op, c.inputs, c.attrs ?? {}, { seed: seedOf(`${caseName(c)} ${c.label}`) });
      const tol = { ...TOL, ...c.tol };
      return {
        maxAbsErr: Math.max(r.forward / tol.forward, r.backward / tol.backward, r.numeric / tol.numeric),
        tol: 1,
      };
    },
  };
}

/** Every op's cases, file by file: its gradchecks, then its kernels against its reference. */
export const OP_ORACLE_CASES: OracleCase[] = files.flatMap((f) => [
  ...(f.CASES ?? []).map(gradcheckCase),
  ...(f.ORACLE_CASES ?? []),
]);
