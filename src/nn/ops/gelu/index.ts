/**
 * gelu: x · Φ(x), the exact (erf) form that PyTorch's nn.GELU() and F.gelu
 * use by default (the tanh approximation is the separate `geluTanh` op).
 */
import { planGeluBackward, planGeluForward } from './kernel.ts';
import { geluRef } from './reference.ts';
import { defineOp, requireF32 } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { geluTanh } from '../activation/index.ts';
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';

export const geluOp = defineOp<Record<string, never>>({
  name: 'gelu',
  // Backward is Φ'(x)·dy: the output is free after its last forward reader.
  backwardReads: () => ({ inputs: [0], output: false }),
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

// The functional form, for `forward` methods (nn.F).
/** GELU, exact (erf) form: PyTorch's nn.GELU() default. */
export const gelu = (x: Tensor): Tensor => apply(geluOp, [x], {});

/** nn.GELU: the exact erf form by default, or approximate 'tanh' (GPT-2's). */
export class GELU extends Module {
  constructor(readonly approximate: 'none' | 'tanh' = 'none') {
    super();
    if (approximate !== 'none' && approximate !== 'tanh')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `GELU: approximate must be 'none' or 'tanh', got ${String(approximate)}`,
      );
  }
  forward(x: Tensor): Tensor {
    return this.approximate === 'tanh' ? geluTanh(x) : gelu(x);
  }
}
