/**
 * Every GPU-vs-CPU oracle case, in one runtime-agnostic list: vitest runs it
 * under Node (test/gpu/oracles.test.ts) and under Deno (test/deno/run-oracles.ts,
 * spawned by test/deno/oracles.test.ts). Kernel families add their cases here;
 * the autodiff ops' gradchecks (each op's test/nn/ops/<op>.cases.ts, gathered by test/nn/op-cases.ts) join them.
 */
import { OP_ORACLE_CASES } from '../nn/op-cases.ts';
import { CONV_POOL_CASES } from './conv_pool_cases.ts';
import { DENSE_CASES, type OracleCase, type OracleResult } from './dense-cases.ts';
import { NN_CASES } from './nn-cases.ts';
import { TENSOR_CASES } from './tensor-cases.ts';

export type { OracleCase, OracleResult };

export const ORACLE_CASES: OracleCase[] = [...DENSE_CASES, ...CONV_POOL_CASES, ...NN_CASES, ...TENSOR_CASES, ...OP_ORACLE_CASES];
