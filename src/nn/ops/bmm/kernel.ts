/** Batched matmul C[b] = op(A[b]) · op(B[b]), with a stride of 0 broadcasting an operand. See shaders/bmm.wgsl. */
import type { Binding, Dispatch, Gpu } from '../../../gpu/gpu.ts';
import { checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('bmm', { shader: 'bmm', entryPoints: ['main'] });

export interface BmmShape {
  batch: number;
  m: number;
  n: number;
  k: number;
  /** A[b] is stored k × m. */
  transA?: boolean;
  /** B[b] is stored n × k. */
  transB?: boolean;
  /** One A (B) for every batch entry instead of batch of them. */
  broadcastA?: boolean;
  broadcastB?: boolean;
  /** C += instead of C =. */
  accumulate?: boolean;
}

export function planBmm(gpu: Gpu, a: Binding, b: Binding, c: Binding, s: BmmShape): Dispatch {
  checkDims('bmm', { batch: s.batch, m: s.m, n: s.n, k: s.k });
  const strideA = s.broadcastA ? 0 : s.m * s.k;
  const strideB = s.broadcastB ? 0 : s.k * s.n;
  const strideC = s.m * s.n;
  checkBindings(
    'bmm',
    {
      a: [a, s.broadcastA ? s.m * s.k : s.batch * strideA],
      b: [b, s.broadcastB ? s.k * s.n : s.batch * strideB],
      c: [c, s.batch * strideC],
    },
    { shape: { ...s } },
  );
  const u = gpu.uniform(
    [
      ['u32', s.m],
      ['u32', s.n],
      ['u32', s.k],
      ['u32', s.batch],
      ['u32', strideA],
      ['u32', strideB],
      ['u32', strideC],
      ['u32', 0],
    ],
    'bmm-dims',
  );
  const constants = { TRANS_A: s.transA ? 1 : 0, TRANS_B: s.transB ? 1 : 0, ACCUMULATE: s.accumulate ? 1 : 0 };
  return planEntry(
    gpu,
    'bmm',
    'main',
    [
      [0, u],
      [1, a],
      [2, b],
      [3, c],
    ],
    [Math.ceil(s.n / 8), Math.ceil(s.m / 8), s.batch],
    constants,
  );
}
