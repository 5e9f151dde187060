/**
 * add: z = a + b for two tensors of the same shape (residual connections).
 * Backward hands ∂z to both inputs. Broadcasting adds live in their own op.
 */
import { planAdd } from '../../../gpu/kernels/elementwise.ts';
import type { Step } from '../../op.ts';
import { defineOp, requireF32, shapeError } from '../../op.ts';
import { apply, type Parameter, type Tensor } from '../../tensor.ts';

export const addOp = defineOp<Record<string, never>>({
  name: 'add',
  // ∂z goes to both inputs as it is.
  backwardReads: () => ({ inputs: [], output: false }),
  shape([a, b], _attrs, info) {
    requireF32(info, 'add', [a, b]);
    if (a.length !== b.length || a.some((d, i) => d !== b[i]))
      throw shapeError(info, 'add', 'both operands must have the same shape', { a, b });
    return { shape: a };
  },
  plan(ctx) {
    const n = ctx.outputShape.reduce((x, y) => x * y, 1);
    const bytes = n * 4;
    // out = a, then out += b: two passes, no new kernel.
    const forward: Step[] = [
      { copy: { src: ctx.input(0), dst: ctx.output(), bytes } },
      ...planAdd(ctx.gpu, ctx.input(1), ctx.output(), n),
    ];
    const dz = ctx.gradOut();
    const backward: Step[] = [];
    for (const i of [0, 1]) {
      const d = ctx.gradIn(i);
      if (dz && d) backward.push({ copy: { src: dz, dst: d, bytes } });
    }
    return { forward, backward };
  },
  cpu: {
    forward: ([a, b]) => a.map((v, i) => v + b[i]),
    backward: (_x, _s, _a, _z, dz) => [dz.slice(), dz.slice()],
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
export const add = (a: T, b: T): Tensor => apply(addOp, [a, b], {});
