/**
 * bmm, batched and shared, with transposes (src/nn/ops/bmm): gradchecks
 * against the f64 oracle and finite differences, and the kernel against the
 * f64 reference over every transpose, shared operands and ACCUMULATE.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { bmmOp } from '../../../src/nn/ops/bmm/index.ts';
import { planBmm, type BmmShape } from '../../../src/nn/ops/bmm/kernel.ts';
import { bmmRef } from '../../../src/nn/ops/bmm/reference.ts';
import { draws, type OracleCase, plus, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: bmmOp, label: 'a[3,4,5] b[3,5,2]', inputs: [s(3, 4, 5), s(3, 5, 2)] },
  { op: bmmOp, label: 'aᵀ[2,5,4] bᵀ[2,3,5]', inputs: [s(2, 5, 4), s(2, 3, 5)], attrs: { transA: true, transB: true } },
  { op: bmmOp, label: 'a[3,4,5] shared b[5,6]', inputs: [s(3, 4, 5), s(5, 6)] },
  { op: bmmOp, label: 'a[2,4,5] shared bᵀ[6,5]', inputs: [s(2, 4, 5), s(6, 5)], attrs: { transB: true } },
];

const { rand } = draws('bmm');

const bmmShapes: BmmShape[] = [
  { batch: 1, m: 1, n: 1, k: 1 },
  { batch: 3, m: 5, n: 7, k: 9 },
  { batch: 4, m: 9, n: 6, k: 5, transA: true },
  { batch: 4, m: 8, n: 17, k: 16, transB: true, accumulate: true },
  { batch: 2, m: 7, n: 3, k: 4, transA: true, transB: true },
  { batch: 5, m: 6, n: 10, k: 12, broadcastB: true, transB: true },
  { batch: 64, m: 32, n: 16, k: 32, broadcastA: true },
];
export const ORACLE_CASES: OracleCase[] = bmmShapes.map((s) => ({
  name: `bmm ${s.transA ? 'Aᵀ' : 'A'}·${s.transB ? 'Bᵀ' : 'B'} batch=${s.batch} m=${s.m} n=${s.n} k=${s.k}${s.broadcastA ? ' shared A' : ''}${s.broadcastB ? ' shared B' : ''}${s.accumulate ? ' (accumulate)' : ''}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const a = rand((s.broadcastA ? 1 : s.batch) * s.m * s.k);
      const b = rand((s.broadcastB ? 1 : s.batch) * s.k * s.n);
      const c0 = rand(s.batch * s.m * s.n);
      const c = t(s.accumulate ? gpu.upload(c0) : gpu.storage(c0.length));
      gpu.record(planBmm(gpu, t(gpu.upload(a)), t(gpu.upload(b)), c, s));
      const want = bmmRef(a, b, s);
      return {
        maxAbsErr: relErr(await gpu.readF32(c, 0, c0.length), s.accumulate ? plus(want, c0) : want),
        tol: 2e-7 * s.k + 2e-6,
      };
    }),
}));
