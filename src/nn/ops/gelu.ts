/**
 * gelu: x · Φ(x), the exact (erf) form that PyTorch's nn.GELU() and F.gelu
 * use by default (the tanh approximation is the separate `geluTanh` op).
 */
import { planGeluBackward, planGeluForward } from '../../gpu/kernels/gelu.ts';
import { geluRef } from '../../gpu/kernels/nn_reference.ts';
import { defineOp, requireF32 } from '../op.ts';
import { sizeOf } from '../tensor.ts';

export const geluOp = defineOp<Record<string, never>>({
  name: 'gelu',
  shape([x], _attrs, info) {
    requireF32(info, 'gelu', [x]);
    return { shape: x };
  },
  plan(ctx) {
    const n = sizeOf(ctx.inputShapes[0]);
    const forward = [planGeluForward(ctx.gpu, ctx.input(0), ctx.output(), n)];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    return { forward, backward: dy && dx ? [planGeluBackward(ctx.gpu, ctx.input(0), dy, dx, n)] : [] };
  },
  cpu: {
    forward: ([x]) => x.map(geluRef.f),
    backward: ([x], _s, _a, _y, dy) => [dy.map((g, i) => g * geluRef.df(x[i]))],
  },
});
