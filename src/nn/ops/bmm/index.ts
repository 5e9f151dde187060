/**
 * bmm: batched matmul, torch.bmm with optional transposes: a [B, m, k] (or
 * [B, k, m] with transA) times b [B, k, n] (or [B, n, k] with transB), or a
 * 2-D b shared by every batch entry (x @ W for a 3-D x), giving [B, m, n].
 * Backward, in the stored layouts:
 *   dA = dC·op(B)ᵀ  (transA: op(B)·dCᵀ),   dB = op(A)ᵀ·dC  (transB: dCᵀ·op(A));
 * a shared b sums over the batch, which is one matmul over the batch·m rows.
 */
import { planBmm } from './kernel.ts';
import { bmmBackwardRef, bmmRef, type BmmRefShape } from './reference.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, type Parameter, type Tensor } from '../../tensor.ts';

export interface BmmAttrs extends Record<string, unknown> {
  transA?: boolean;
  transB?: boolean;
}

function dims([a, b]: readonly (readonly number[])[], attrs: BmmAttrs): BmmRefShape {
  const [batch, a1, a2] = a;
  const [m, k] = attrs.transA ? [a2, a1] : [a1, a2];
  const shared = b.length === 2;
  const [b1, b2] = shared ? b : [b[1], b[2]];
  const n = attrs.transB ? b1 : b2;
  return { batch, m, n, k, transA: attrs.transA, transB: attrs.transB, broadcastB: shared };
}

export const bmmOp = defineOp<BmmAttrs>({
  name: 'bmm',
  shape([a, b], attrs, info) {
    requireF32(info, 'bmm', [a, b]);
    if (a.length !== 3 || (b.length !== 3 && b.length !== 2))
      throw shapeError(info, 'bmm', 'needs a [batch, m, k] and b [batch, k, n] or [k, n]', { a, b });
    if (b.length === 3 && b[0] !== a[0])
      throw shapeError(info, 'bmm', `batch sizes differ (${a[0]} vs ${b[0]})`, { a, b });
    if (b.length === 2 && attrs.transA)
      throw shapeError(info, 'bmm', 'a shared 2-D b is not supported with transA (transpose a first)', { a, b });
    const s = dims([a, b], attrs);
    const bk = attrs.transB ? (b.length === 2 ? b[1] : b[2]) : b.length === 2 ? b[0] : b[1];
    if (bk !== s.k) throw shapeError(info, 'bmm', `the shared dimension differs: ${s.k} in a, ${bk} in b`, { a, b });
    return { shape: [s.batch, s.m, s.n] };
  },
  plan(ctx, attrs) {
    const s = dims(ctx.inputShapes, attrs);
    const [a, b] = [ctx.input(0), ctx.input(1)];
    const forward: Step[] = [planBmm(ctx.gpu, a, b, ctx.output(), s)];
    const dc = ctx.gradOut();
    const [da, db] = [ctx.gradIn(0), ctx.gradIn(1)];
    const backward: Step[] = [];
    if (!dc) return { forward, backward };
    const { batch, m, n, k, transA, transB } = s;
    if (da) {
      backward.push(
        transA
          ? planBmm(ctx.gpu, b, dc, da, {
              batch,
              m: k,
              n: m,
              k: n,
              transA: transB,
              transB: true,
              broadcastA: s.broadcastB,
            })
          : planBmm(ctx.gpu, dc, b, da, { batch, m, n: k, k: n, transB: !transB, broadcastB: s.broadcastB }),
      );
    }
    if (db) {
      // A shared b: its gradient sums over the batch, i.e. one product over all batch·m rows.
      const [bb, rows] = s.broadcastB ? [1, batch * m] : [batch, m];
      backward.push(
        transB
          ? planBmm(ctx.gpu, dc, a, db, { batch: bb, m: n, n: k, k: rows, transA: true, transB: transA })
          : planBmm(ctx.gpu, a, dc, db, { batch: bb, m: k, n, k: rows, transA: !transA }),
      );
    }
    return { forward, backward };
  },
  cpu: {
    forward: ([a, b], shapes, attrs) => bmmRef(a, b, dims(shapes, attrs)),
    backward([a, b], shapes, attrs, _c, dc) {
      const g = bmmBackwardRef(a, b, dc, dims(shapes, attrs));
      return [g.da, g.db];
    },
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Batched matmul [b, m, k]·[b, k, n] (or a shared [k, n]), optional transposes. */
export const bmm = (a: T, b: T, options: { transA?: boolean; transB?: boolean } = {}): Tensor =>
  apply(bmmOp, [a, b], { ...options });
