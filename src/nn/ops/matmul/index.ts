/**
 * matmul: C[M, N] = A[M, K]·B[K, N] for two 2-D tensors.
 * Backward: dA = dC·Bᵀ, dB = Aᵀ·dC.
 */
import { planMatmulAnySize, planMatmulSteps } from '../../../gpu/kernels/matmul-slices.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, type Parameter, type Tensor } from '../../tensor.ts';

export const matmulOp = defineOp<Record<string, never>>({
  name: 'matmul',
  shape([a, b], _attrs, info) {
    requireF32(info, 'matmul', [a, b]);
    if (a.length !== 2 || b.length !== 2) throw shapeError(info, 'matmul', 'needs two 2-D tensors', { a, b });
    if (a[1] !== b[0]) throw shapeError(info, 'matmul', `a's columns ${a[1]} must equal b's rows ${b[0]}`, { a, b });
    return { shape: [a[0], b[1]] };
  },
  plan(ctx) {
    const [[m, k], [, n]] = ctx.inputShapes;
    const scratch = (words: number, label: string) => ctx.scratch(words, label);
    // An operand bigger than one binding is planned in slices: matmul-slices.ts.
    const forward: Step[] = planMatmulAnySize(ctx.gpu, ctx.input(0), ctx.input(1), ctx.output(), { m, n, k }, scratch);
    const dc = ctx.gradOut();
    const backward: Step[] = [];
    const [da, db] = [ctx.gradIn(0), ctx.gradIn(1)];
    if (dc && da)
      backward.push(...planMatmulAnySize(ctx.gpu, dc, ctx.input(1), da, { m, n: k, k: n, transB: true }, scratch));
    if (dc && db)
      backward.push(...planMatmulSteps(ctx.gpu, ctx.input(0), dc, db, { m: k, n, k: m, transA: true }, scratch));
    return { forward, backward };
  },
  cpu: {
    forward([a, b], [[m, k], [, n]]) {
      const c = new Float64Array(m * n);
      for (let i = 0; i < m; i++)
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
          c[i * n + j] = s;
        }
      return c;
    },
    backward([a, b], [[m, k], [, n]], _attrs, _c, dc) {
      const da = new Float64Array(m * k);
      const db = new Float64Array(k * n);
      for (let i = 0; i < m; i++)
        for (let j = 0; j < n; j++) {
          const g = dc[i * n + j];
          for (let p = 0; p < k; p++) {
            da[i * k + p] += g * b[p * n + j];
            db[p * n + j] += g * a[i * k + p];
          }
        }
      return [da, db];
    },
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
export const matmul = (a: T, b: T): Tensor => apply(matmulOp, [a, b], {});
