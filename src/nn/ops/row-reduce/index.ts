/**
 * mean and max over the last dimension, keeping it as 1 ([…, C] → […, 1]) so
 * that the result broadcasts back against its input in mul / addBroadcast:
 * the reductions RMSNorm, a stable softmax or a pooled head are composed of.
 * max routes the gradient to the first maximum of each row, as torch.max does.
 */
import { defineOp, type Op, requireF32, shapeError } from '../../op.ts';
import { apply, type Shape, type Tensor } from '../../tensor.ts';
import { planRowReduceBackward, planRowReduceForward, type RowReduceKind, type RowsShape } from './kernel.ts';
import { maxRowsBackwardRef, maxRowsRef, meanRowsBackwardRef, meanRowsRef } from './reference.ts';

function rowsOf(shape: readonly number[]): RowsShape {
  const cols = shape[shape.length - 1];
  return { rows: shape.reduce((a, b) => a * b, 1) / cols, cols };
}

function rowReduceOp(kind: RowReduceKind): Op<Record<string, never>> {
  return defineOp<Record<string, never>>({
    name: kind,
    shape([x], _attrs, info) {
      requireF32(info, kind, [x]);
      if (x.length === 0 || x[x.length - 1] < 1)
        throw shapeError(info, kind, 'needs a tensor with a last dimension to reduce', { x });
      return { shape: [...x.slice(0, -1), 1] as Shape };
    },
    plan(ctx) {
      const s = rowsOf(ctx.inputShapes[0]);
      const forward = [planRowReduceForward(ctx.gpu, kind, ctx.input(0), ctx.output(), s)];
      const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
      return { forward, backward: dy && dx ? [planRowReduceBackward(ctx.gpu, kind, ctx.input(0), dy, dx, s)] : [] };
    },
    cpu: {
      forward: ([x], [shape]) => {
        const { rows, cols } = rowsOf(shape);
        return kind === 'mean' ? meanRowsRef(x, rows, cols) : maxRowsRef(x, rows, cols);
      },
      backward: ([x], [shape], _a, _y, dy) => {
        const { rows, cols } = rowsOf(shape);
        return [kind === 'mean' ? meanRowsBackwardRef(dy, rows, cols) : maxRowsBackwardRef(x, dy, rows, cols)];
      },
    },
  });
}

export const meanOp = rowReduceOp('mean');
export const maxOp = rowReduceOp('max');

// The functional forms, for `forward` methods (nn.F).
/** Mean over the last dimension, kept as 1: […, C] → […, 1]. */
export const mean = (x: Tensor): Tensor => apply(meanOp, [x], {});
/** Maximum over the last dimension, kept as 1: […, C] → […, 1]. */
export const max = (x: Tensor): Tensor => apply(maxOp, [x], {});
