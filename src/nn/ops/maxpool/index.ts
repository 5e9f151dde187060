/**
 * maxPool2d: 2×2 windows, stride 2, NCHW (an odd last row or column is
 * dropped, as in PyTorch). With `attrs.relu` (set by the planner when a ReLU
 * feeds it and nothing else reads the ReLU) it pools relu(x) without storing
 * it: ReLU and max commute, and a window whose max is not positive passes no
 * gradient. The forward saves each window's winner for backward.
 */
import { planMaxPoolBackward, planMaxPoolForward, type PoolShape } from './kernel.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, type Shape, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';

export interface MaxPoolAttrs extends Record<string, unknown> {
  relu?: boolean;
}

const poolShape = (x: Shape): PoolShape => ({ n: x[0], c: x[1], h: x[2], w: x[3] });

export const maxPool2dOp = defineOp<MaxPoolAttrs>({
  name: 'maxPool2d',
  fusesReluBefore: true,
  shape([x], _attrs, info) {
    requireF32(info, 'maxPool2d', [x]);
    if (x.length !== 4 || x[2] < 2 || x[3] < 2)
      throw shapeError(info, 'maxPool2d', 'needs x [N, C, H, W] with H, W ≥ 2', { x });
    return { shape: [x[0], x[1], Math.floor(x[2] / 2), Math.floor(x[3] / 2)] };
  },
  plan(ctx, attrs) {
    const s = poolShape(ctx.inputShapes[0]);
    const argmax = ctx.scratch(
      ctx.outputShape.reduce((a, b) => a * b, 1),
      'argmax',
    );
    const forward: Step[] = [planMaxPoolForward(ctx.gpu, s, ctx.input(0), ctx.output(), argmax, attrs.relu === true)];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    return { forward, backward: dy && dx ? [planMaxPoolBackward(ctx.gpu, s, dy, argmax, dx)] : [] };
  },
  cpu: {
    forward([x], [shape], attrs) {
      return pool(shape, x, attrs.relu === true).y;
    },
    backward([x], [shape], attrs, _y, dy) {
      const { winner } = pool(shape, x, attrs.relu === true);
      const dx = new Float64Array(x.length);
      winner.forEach((at, o) => {
        if (at >= 0) dx[at] = dy[o];
      });
      return [dx];
    },
  },
});

/** Pooled values and, per output, the input index that won (first of equals; −1 when a fused ReLU zeroed it). */
function pool([n, c, h, w]: Shape, x: Float64Array, relu: boolean): { y: Float64Array; winner: Int32Array } {
  const [oh, ow] = [Math.floor(h / 2), Math.floor(w / 2)];
  const y = new Float64Array(n * c * oh * ow);
  const winner = new Int32Array(y.length);
  for (let p = 0; p < n * c; p++)
    for (let oy = 0; oy < oh; oy++)
      for (let ox = 0; ox < ow; ox++) {
        const base = (p * h + 2 * oy) * w + 2 * ox;
        let best = base;
        for (const at of [base + 1, base + w, base + w + 1]) if (x[at] > x[best]) best = at;
        const o = (p * oh + oy) * ow + ox;
        const zeroed = relu && !(x[best] > 0);
        y[o] = zeroed ? 0 : x[best];
        winner[o] = zeroed ? -1 : best;
      }
  return { y, winner };
}

// The functional form, for `forward` methods (nn.F).
export const maxPool2d = (x: Tensor): Tensor => apply(maxPool2dOp, [x], {});

/** 2×2 max-pooling with stride 2 (nn.MaxPool2d(2)). */
export class MaxPool2d extends Module {
  forward(x: Tensor): Tensor {
    return maxPool2d(x);
  }
}
