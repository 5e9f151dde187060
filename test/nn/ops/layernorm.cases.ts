/**
 * layerNorm (src/nn/ops/layernorm): gradchecks against the f64 oracle and
 * finite differences, and the kernels (output, saved mean and rstd, the
 * three gradients, with and without ACCUMULATE) against the f64 reference.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { layerNormOp } from '../../../src/nn/ops/layernorm/index.ts';
import { planLayerNormBackward, planLayerNormForward } from '../../../src/nn/ops/layernorm/kernel.ts';
import { layerNormBackwardRef, layerNormRef } from '../../../src/nn/ops/layernorm/reference.ts';
import { draws, type OracleCase, perReduction, plus, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: layerNormOp, label: 'x[6,16] w[16] b[16]', inputs: [s(6, 16), s(16), s(16)] },
  { op: layerNormOp, label: 'x[2,3,5] w[5] b[5], eps 1e-3', inputs: [s(2, 3, 5), s(5), s(5)], attrs: { eps: 1e-3 } },
];

const { rand } = draws('layernorm');

export const ORACLE_CASES: OracleCase[] = (
  [
    [1, 1, false],
    [3, 7, true],
    [129, 64, false],
    [1000, 33, true],
    [8192, 64, true],
  ] as [number, number, boolean][]
).flatMap(([rows, cols, accumulate]) =>
  perReduction((reduction) => ({
    name: `layerNorm forward+backward rows=${rows} cols=${cols}${accumulate ? ' (accumulate)' : ''}`,
    run: (gpu) =>
      scoped(gpu, async (t) => {
        // An offset of 3 checks that the variance does not cancel.
        const [x, w, b, dy] = [rand(rows * cols, 2, 3), rand(cols, 1, 1), rand(cols), rand(rows * cols)];
        const [dx0, dw0, db0] = [rand(rows * cols), rand(cols), rand(cols)];
        const [xb, wb, y, stats] = [
          t(gpu.upload(x)),
          t(gpu.upload(w)),
          t(gpu.storage(rows * cols)),
          t(gpu.storage(2 * rows)),
        ];
        const [dxb, dwb, dbb] = accumulate
          ? [t(gpu.upload(dx0)), t(gpu.upload(dw0)), t(gpu.upload(db0))]
          : [t(gpu.storage(rows * cols)), t(gpu.storage(cols)), t(gpu.storage(cols))];
        gpu.record([
          planLayerNormForward(gpu, { rows, cols }, { x: xb, weight: wb, bias: t(gpu.upload(b)), y, stats }, reduction),
          ...planLayerNormBackward(
            gpu,
            { rows, cols },
            { x: xb, weight: wb, stats, dy: t(gpu.upload(dy)), dx: dxb, dweight: dwb, dbias: dbb },
            { accumulate, accumulateParams: accumulate, reduction },
          ),
        ]);
        const want = layerNormRef(x, w, b, rows, cols);
        const grads = layerNormBackwardRef(x, w, dy, rows, cols);
        const base = (v: Float64Array, v0: Float32Array) => (accumulate ? plus(v, v0) : v);
        const stat = await gpu.readF32(stats, 0, 2 * rows);
        return {
          maxAbsErr: Math.max(
            relErr(await gpu.readF32(y, 0, rows * cols), want.y),
            relErr(
              stat.filter((_, i) => i % 2 === 0),
              want.mean,
            ),
            relErr(
              stat.filter((_, i) => i % 2 === 1),
              want.rstd,
            ) / 1e3, // rstd of a 1-wide row is 1/sqrt(eps)
            relErr(await gpu.readF32(dxb, 0, rows * cols), base(grads.dx, dx0)),
            relErr(await gpu.readF32(dwb, 0, cols), base(grads.dw, dw0)) / Math.max(1, rows / 256),
            relErr(await gpu.readF32(dbb, 0, cols), base(grads.db, db0)) / Math.max(1, rows / 256),
          ),
          tol: 2e-5,
        };
      }),
  })),
);
