/**
 * Every GPU-vs-CPU oracle case, in one runtime-agnostic list: vitest runs it
 * under Node (test/gpu/oracles.test.ts) and under Deno (test/deno/run-oracles.ts,
 * spawned by test/deno/oracles.test.ts). The GPU layer's kernels and the
 * whole models have their lists here; each op's cases, its kernels against
 * its f64 reference and its gradchecks, are in its own file,
 * test/nn/ops/<op>.cases.ts, which test/nn/op-cases.ts gathers by listing the
 * folder; each optimizer's, its update against an f64 reference, in test/optimizers/<name>.cases.ts,
 * which test/optimizers/optimizer-cases.ts gathers the same way.
 */
import { OP_ORACLE_CASES } from '../nn/op-cases.ts';
import { OPTIMIZER_ORACLE_CASES } from '../optimizers/optimizer-cases.ts';
import { CNN_CASES } from './cnn-cases.ts';
import { asOracleCase } from './comparisons.ts';
import { DENSE_CASES } from './dense-cases.ts';
import { MICRO_BATCH_CASES } from './micro-batch-cases.ts';
import { LOSS_SCALE_CASES } from './loss-scale-cases.ts';
import { SLICED_CASES } from './sliced-cases.ts';
import { casesFor, type OracleCase, type OracleResult } from './oracle-case.ts';

export { casesFor, type OracleCase, type OracleResult };

export const ORACLE_CASES: OracleCase[] = [
  ...DENSE_CASES,
  ...CNN_CASES.map(asOracleCase),
  ...OP_ORACLE_CASES,
  ...OPTIMIZER_ORACLE_CASES,
  ...SLICED_CASES,
  ...MICRO_BATCH_CASES,
  ...LOSS_SCALE_CASES,
];
