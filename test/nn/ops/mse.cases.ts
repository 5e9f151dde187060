/**
 * mseLoss (src/nn/ops/mse): a gradcheck against the f64 oracle and finite
 * differences, and the loss and gradient kernels against the f64 reference.
 */
import type { Gpu } from '../../../src/gpu/gpu.ts';
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { mseOp } from '../../../src/nn/ops/mse/index.ts';
import { planMseGrad, planMseLoss } from '../../../src/nn/ops/mse/kernel.ts';
import { mseRef } from '../../../src/nn/ops/mse/reference.ts';
import { draws, type OracleCase, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [{ op: mseOp, label: 'pred[3,4] target[3,4]', inputs: [s(3, 4), s(3, 4)] }];

const { rand } = draws('mse');

export const ORACLE_CASES: OracleCase[] = [1, 7, 10007].map((n) => ({
  name: `mse loss + gradient (scaled by an upstream gradient) n=${n}`,
  run: (gpu: Gpu) =>
    scoped(gpu, async (t) => {
      const [pred, target] = [rand(n, 3), rand(n)];
      const [result, dpred] = [t(gpu.storage(4)), t(gpu.storage(n))];
      const [pb, tb] = [t(gpu.upload(pred)), t(gpu.upload(target))];
      gpu.record([
        ...planMseLoss(gpu, { pred: pb, target: tb, result }, n, 1, (w, l) => t(gpu.storage(w, l))),
        planMseGrad(gpu, { pred: pb, target: tb, dpred }, n, {
          gradScale: 0.5,
          upstream: t(gpu.upload(new Float32Array([-3]))),
        }),
      ]);
      const want = mseRef(pred, target);
      const [loss] = await gpu.readF32(result, 1, 1);
      return {
        maxAbsErr: Math.max(
          relErr([loss], [want.loss]),
          relErr(
            await gpu.readF32(dpred, 0, n),
            want.dpred.map((g) => -1.5 * g),
          ),
        ),
        tol: 1e-6 * Math.sqrt(n) + 1e-6,
      };
    }),
}));
