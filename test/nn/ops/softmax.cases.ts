/**
 * softmax (src/nn/ops/softmax): a gradcheck against the f64 oracle and finite
 * differences, and the kernels against the f64 reference on logits up to ±20.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { softmaxOp } from '../../../src/nn/ops/softmax/index.ts';
import { planSoftmaxBackward, planSoftmaxForward } from '../../../src/nn/ops/softmax/kernel.ts';
import { softmaxBackwardRef, softmaxRef } from '../../../src/nn/ops/softmax/reference.ts';
import { draws, type OracleCase, perReduction, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });

export const CASES: OpCase[] = [{ op: softmaxOp, label: 'x[5,9]', inputs: [s(5, 9)] }];

const { rand } = draws('softmax');

export const ORACLE_CASES: OracleCase[] = [
  [1, 1],
  [7, 33],
  [129, 10],
  [64, 513],
].flatMap(([rows, cols]) =>
  perReduction((reduction) => ({
    name: `softmax forward+backward rows=${rows} cols=${cols}`,
    run: (gpu) =>
      scoped(gpu, async (t) => {
        const x = rand(rows * cols, 20);
        const dy = rand(rows * cols);
        const [y, dx] = [t(gpu.storage(rows * cols)), t(gpu.storage(rows * cols))];
        gpu.record([
          planSoftmaxForward(gpu, t(gpu.upload(x)), y, rows, cols, reduction),
          planSoftmaxBackward(gpu, y, t(gpu.upload(dy)), dx, rows, cols, false, reduction),
        ]);
        const want = softmaxRef(x, rows, cols);
        return {
          maxAbsErr: Math.max(
            relErr(await gpu.readF32(y, 0, rows * cols), want),
            relErr(await gpu.readF32(dx, 0, rows * cols), softmaxBackwardRef(want, dy, rows, cols)),
          ),
          tol: 1e-5,
        };
      }),
  })),
);
