/** mseLoss: mean((pred − target)²) as a scalar [1] (F.mse_loss, reduction 'mean'); both inputs get gradients. */
import { planScaleTo } from '../broadcast/kernel.ts';
import { planMseGrad, planMseLoss } from './kernel.ts';
import { mseRef } from './reference.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, type Parameter, sizeOf, type Tensor } from '../../tensor.ts';

export const mseOp = defineOp<Record<string, never>>({
  name: 'mseLoss',
  shape([pred, target], _attrs, info) {
    requireF32(info, 'mseLoss', [pred, target]);
    if (pred.length !== target.length || pred.some((d, i) => d !== target[i]))
      throw shapeError(info, 'mseLoss', 'prediction and target must have the same shape', { pred, target });
    return { shape: [1] };
  },
  plan(ctx) {
    const n = sizeOf(ctx.inputShapes[0]);
    const [pred, target] = [ctx.input(0), ctx.input(1)];
    const forward = planMseLoss(ctx.gpu, { pred, target, result: ctx.output() }, n, 0, (words, label) =>
      ctx.scratch(words, label),
    );
    const [dl, dp, dt] = [ctx.gradOut(), ctx.gradIn(0), ctx.gradIn(1)];
    if (!dl || (!dp && !dt)) return { forward, backward: [] };
    // The target's gradient is minus the prediction's: computed there (or in scratch) and negated.
    const dpred = dp ?? { buffer: ctx.scratch(n, 'dpred'), offset: 0, size: n * 4 };
    const backward: Step[] = [planMseGrad(ctx.gpu, { pred, target, dpred }, n, { upstream: dl })];
    if (dt) backward.push(planScaleTo(ctx.gpu, -1, dpred, dt, n));
    return { forward, backward };
  },
  cpu: {
    forward: ([p, t]) => Float64Array.of(mseRef(p, t).loss),
    backward([p, t], _s, _a, _y, dl) {
      const d = mseRef(p, t).dpred.map((g) => g * dl[0]);
      return [d, d.map((g) => -g)];
    },
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Mean squared error → [1]. */
export const mseLoss = (pred: Tensor, target: T): Tensor => apply(mseOp, [pred, target], {});
