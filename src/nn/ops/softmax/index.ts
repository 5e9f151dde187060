/** softmax over the last dimension. Backward reads the saved output: dx = y · (dy − Σ dy·y). */
import { planSoftmaxBackward, planSoftmaxForward } from './kernel.ts';
import { softmaxBackwardRef, softmaxRef } from './reference.ts';
import { defineOp, requireF32 } from '../../op.ts';
import { rowsOf } from '../grad-target.ts';
import { apply, type Tensor } from '../../tensor.ts';

export const softmaxOp = defineOp<Record<string, never>>({
  name: 'softmax',
  shape([x], _attrs, info) {
    requireF32(info, 'softmax', [x]);
    return { shape: x };
  },
  plan(ctx) {
    const { rows, cols } = rowsOf(ctx.inputShapes[0]);
    const forward = [planSoftmaxForward(ctx.gpu, ctx.input(0), ctx.output(), rows, cols)];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    return { forward, backward: dy && dx ? [planSoftmaxBackward(ctx.gpu, ctx.output(), dy, dx, rows, cols)] : [] };
  },
  cpu: {
    forward: ([x], [s]) => softmaxRef(x, rowsOf(s).rows, rowsOf(s).cols),
    backward: (_x, [s], _a, y, dy) => [softmaxBackwardRef(y, dy, rowsOf(s).rows, rowsOf(s).cols)],
  },
});

// The functional form, for `forward` methods (nn.F).
/** Softmax over the last dimension. */
export const softmax = (x: Tensor): Tensor => apply(softmaxOp, [x], {});
