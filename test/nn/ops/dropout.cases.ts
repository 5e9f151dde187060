/**
 * dropout, training and evaluation (src/nn/ops/dropout): gradchecks against
 * the f64 oracle and finite differences, and the kernels against the f64
 * reference: the mask per (seed, step), forward = backward, the kept fraction.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { dropoutOp } from '../../../src/nn/ops/dropout/index.ts';
import {
  dropoutThreshold,
  planDropoutAdvance,
  planDropoutBackward,
  planDropoutForward,
} from '../../../src/nn/ops/dropout/kernel.ts';
import { dropoutMaskRef, dropoutRef } from '../../../src/nn/ops/dropout/reference.ts';
import { draws, type OracleCase, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [
  { op: dropoutOp, label: 'x[8,32] p 0.25 seed 7', inputs: [s(8, 32)], attrs: { p: 0.25, seed: 7 } },
  { op: dropoutOp, label: 'x[5] evaluation (identity)', inputs: [s(5)], attrs: { p: 0.5, seed: 7, training: false } },
];

const { rand } = draws('dropout');

export const ORACLE_CASES: OracleCase[] = [
  [1, 0.5],
  [4099, 0.3],
  [10007, 0],
].map(([n, p]) => ({
  name: `dropout p=${p} n=${n}: mask per (seed, step), forward = backward, kept fraction`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const o = { n, p, seed: 1234 };
      const [x, dy] = [rand(n), rand(n)];
      const state = t(gpu.upload(new Uint32Array([4])));
      const [y, dx] = [t(gpu.storage(n)), t(gpu.storage(n))];
      // advance: the step becomes 5, for forward and backward alike.
      gpu.record([
        planDropoutAdvance(gpu, state),
        planDropoutForward(gpu, o, state, t(gpu.upload(x)), y),
        planDropoutBackward(gpu, o, state, t(gpu.upload(dy)), dx),
      ]);
      const [step] = await gpu.readU32(state, 0, 1);
      const got = await gpu.readF32(y, 0, n);
      const kept = dropoutMaskRef(n, p, o.seed, 5).reduce((a, b) => a + b, 0) / n;
      const other = dropoutMaskRef(n, p, o.seed, 6);
      const sameAsNextStep = dropoutMaskRef(n, p, o.seed, 5).every((m, i) => m === other[i]);
      // 6 standard deviations of a binomial fraction.
      const fractionOff = n > 100 ? Math.max(0, Math.abs(kept - (1 - p)) - 6 * Math.sqrt((p * (1 - p)) / n)) : 0;
      return {
        maxAbsErr: Math.max(
          Math.abs(step - 5),
          relErr(got, dropoutRef(x, p, o.seed, 5)),
          relErr(await gpu.readF32(dx, 0, n), dropoutRef(dy, p, o.seed, 5)),
          fractionOff,
          p > 0 && n > 100 && sameAsNextStep ? 1 : 0,
          dropoutThreshold(p) === (p === 0 ? 0 : Math.floor(p * 2 ** 32)) ? 0 : 1,
        ),
        tol: 1e-6,
      };
    }),
}));
