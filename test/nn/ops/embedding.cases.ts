/**
 * embedding, where repeated ids accumulate (src/nn/ops/embedding): gradchecks
 * against the f64 oracle and finite differences, and the gather and scatter
 * kernels against the f64 reference.
 */
import type { GradcheckInput } from '../../../src/nn/gradcheck.ts';
import { embeddingOp } from '../../../src/nn/ops/embedding/index.ts';
import { planEmbeddingBackward, planEmbeddingForward } from '../../../src/nn/ops/embedding/kernel.ts';
import { embeddingBackwardRef, embeddingRef } from '../../../src/nn/ops/embedding/reference.ts';
import { draws, type OracleCase, plus, relErr, scoped } from '../../oracles/oracle-case.ts';
import type { OpCase } from '../op-cases.ts';

const s = (...shape: number[]): GradcheckInput => ({ shape });
const ids = (data: number[], ...shape: number[]): GradcheckInput => ({ shape, dtype: 'u32', data });

export const CASES: OpCase[] = [
  {
    op: embeddingOp,
    label: 'ids[2,5] (repeats) weight[4,3]',
    inputs: [ids([0, 3, 3, 1, 0, 2, 3, 3, 1, 0], 2, 5), s(4, 3)],
  },
];

const { rand, randInts } = draws('embedding');

export const ORACLE_CASES: OracleCase[] = (
  [
    [7, 3, 5, false],
    [33, 27, 16, true],
    [1001, 5, 7, true],
    [8192, 32, 64, false],
    [1, 4, 3, false],
    [130, 1, 5, true],
    [100, 3000, 4, false],
  ] as [number, number, number, boolean][]
).map(([rows, vocab, dim, accumulate]) => ({
  name: `embedding gather+scatter rows=${rows} vocab=${vocab} dim=${dim}${accumulate ? ' (accumulate)' : ''}`,
  run: (gpu) =>
    scoped(gpu, async (t) => {
      const ids = randInts(rows, vocab);
      const [w, dy, dw0] = [rand(vocab * dim), rand(rows * dim), rand(vocab * dim)];
      const s = { rows, vocab, dim };
      const idb = t(gpu.upload(ids));
      const [out, dw] = [t(gpu.storage(rows * dim)), t(accumulate ? gpu.upload(dw0) : gpu.storage(vocab * dim))];
      gpu.record([
        ...planEmbeddingForward(gpu, s, idb, t(gpu.upload(w)), out),
        ...planEmbeddingBackward(gpu, s, idb, t(gpu.upload(dy)), dw, accumulate, (n, l) => t(gpu.storage(n, l))),
      ]);
      const dwWant = embeddingBackwardRef(ids, dy, rows, vocab, dim);
      return {
        maxAbsErr: Math.max(
          relErr(await gpu.readF32(out, 0, rows * dim), embeddingRef(ids, w, rows, dim)),
          relErr(await gpu.readF32(dw, 0, vocab * dim), accumulate ? plus(dwWant, dw0) : dwWant),
        ),
        tol: 2e-6 * Math.sqrt(rows),
      };
    }),
}));
