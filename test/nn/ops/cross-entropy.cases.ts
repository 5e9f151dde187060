/**
 * crossEntropy with ignored targets (src/nn/ops/cross-entropy): gradchecks
 * against the f64 oracle and finite differences, and the kernel (loss,
 * count, correct, logits' gradient) against the f64 reference, up to every
 * target ignored.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { crossEntropyOp } from '../../../src/nn/ops/cross-entropy/index.ts';
import { seededUniform } from '../../../src/engine/random.ts';
import { checkTargets, planCrossEntropy } from '../../../src/nn/ops/cross-entropy/kernel.ts';
import { crossEntropyRef } from '../../../src/nn/ops/cross-entropy/reference.ts';
import { draws, type OracleCase, perReduction, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });
const ids = (data: number[], ...shape: number[]): GradcheckInput => ({ shape, dtype: 'u32', data });

/** Targets for [positions] over `classes`, every `ignoreEvery`-th one ignored (−1). */
function targets(positions: number, classes: number, ignoreEvery: number): GradcheckInput {
  return ids(
    Array.from({ length: positions }, (_, i) => (i % ignoreEvery === ignoreEvery - 1 ? -1 : (i * 7) % classes)),
    positions,
  );
}

export const CASES: OpCase[] = [
  {
    op: crossEntropyOp,
    label: 'logits[2,6,5] targets[2,6], a third ignored',
    inputs: [s(2, 6, 5), { ...targets(12, 5, 3), shape: [2, 6] }],
  },
  { op: crossEntropyOp, label: 'logits[4,27] targets[4], none ignored', inputs: [s(4, 27), targets(4, 27, 100)] },
];

const { rand, randInts } = draws('cross-entropy');

/**
 * [positions, classes, fraction of targets ignored]; [5, 3, 1] ignores everything (loss 0, zero gradient).
 * GPT-2's 50,257 classes: one invocation looping over a row went wrong past 32,768 on lavapipe.
 */
export const ORACLE_CASES: OracleCase[] = [
  [1, 1, 0],
  [7, 27, 0.3],
  [8192, 27, 0.4],
  [5, 3, 1],
  [3, 50257, 0.3],
  [70, 1000, 0],
].flatMap(([positions, classes, ignored]) =>
  perReduction((reduction) => ({
    name: `crossEntropy positions=${positions} classes=${classes} ignored≈${ignored * 100}%`,
    run: (gpu) =>
      scoped(gpu, async (t) => {
        const logits = rand(positions * classes, 30);
        const u = seededUniform(positions * 31 + classes);
        const targets = checkTargets(
          Array.from(randInts(positions, classes), (v) => (u() < ignored ? -1 : v)),
          positions,
          classes,
        );
        const [dl, rows, result] = [
          t(gpu.storage(positions * classes)),
          t(gpu.storage(3 * positions)),
          t(gpu.storage(8)),
        ];
        gpu.record(
          planCrossEntropy(
            gpu,
            { logits: t(gpu.upload(logits)), targets: t(gpu.upload(targets)), dlogits: dl, rowStats: rows, result },
            positions,
            classes,
            { outIndex: 4, reduction },
          ),
        );
        const want = crossEntropyRef(logits, targets, positions, classes);
        const [loss, correct, count] = await gpu.readF32(result, 4, 3);
        return {
          maxAbsErr: Math.max(
            relErr([loss], [want.loss]),
            Math.abs(count - want.count),
            Math.abs(correct - want.correct),
            relErr(await gpu.readF32(dl, 0, positions * classes), want.dlogits) * Math.max(1, want.count),
          ),
          tol: 1e-5,
        };
      }),
  })),
);
