/**
 * gelu, exact erf form (src/nn/ops/gelu): a gradcheck over a spread of inputs
 * from −7 to 7 against the f64 oracle and finite differences, and the
 * kernels against the f64 reference over [-10, 10] and a few exact points.
 */
import { geluOp } from '../../../src/nn/ops/gelu/index.ts';
import { planGeluBackward, planGeluForward } from '../../../src/nn/ops/gelu/kernel.ts';
import { geluRef } from '../../../src/nn/ops/gelu/reference.ts';
import { draws, type OracleCase, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

export const CASES: OpCase[] = [
  {
    op: geluOp,
    label: 'x[4,70] (erf)',
    inputs: [{ shape: [4, 70], data: Array.from({ length: 280 }, (_, i) => (i - 140) / 20) }],
  },
];

const { rand } = draws('gelu');

export const ORACLE_CASES: OracleCase[] = (
  [
    [1, false],
    [7, true],
    [4099, false],
  ] as [number, boolean][]
).map(([n, accumulate]) => ({
  name: `gelu (erf) forward+backward n=${n}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      // [-10, 10] reaches both tails; a few exact points too.
      const x = rand(n, 10).map((v, i) => [0, -1, 1, 5.5, -5.5][i] ?? v);
      const dy = rand(n);
      const dx0 = rand(n);
      const [xb, y, dxb] = [t(gpu.upload(x)), t(gpu.storage(n)), t(accumulate ? gpu.upload(dx0) : gpu.storage(n))];
      gpu.record([planGeluForward(gpu, xb, y, n), planGeluBackward(gpu, xb, t(gpu.upload(dy)), dxb, n, accumulate)]);
      const dx = Float64Array.from(x, (v, i) => dy[i] * geluRef.df(v) + (accumulate ? dx0[i] : 0));
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(y, 0, n), Array.from(x, geluRef.f)),
          relErr(await gpu.readF32(dxb, 0, n), dx),
        ),
        tol: 1e-5,
      };
    }),
}));
