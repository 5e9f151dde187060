/**
 * reshape: the same values under another shape (row-major), e.g. flatten
 * [N, C, H, W] → [N, C·H·W]. A view: no work, the storage (and gradient) is
 * shared with the input.
 */
import { defineOp, shapeError } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';

export interface ReshapeAttrs extends Record<string, unknown> {
  shape: number[];
}

export const reshapeOp = defineOp<ReshapeAttrs>({
  name: 'reshape',
  view: true,
  shape([x], { shape }, info) {
    if (!shape.every((d) => Number.isInteger(d) && d > 0) || sizeOf(shape) !== sizeOf(x)) {
      throw shapeError(info, 'reshape', `cannot view ${sizeOf(x)} values as the requested shape`, {
        x,
        requested: shape,
      });
    }
    return { shape, dtype: info.dtypes[0] };
  },
  plan: () => ({ forward: [], backward: [] }),
  cpu: {
    forward: ([x]) => x.slice(),
    backward: (_x, _s, _a, _y, dy) => [dy.slice()],
  },
});

// The functional forms, for `forward` methods (nn.F).
export const reshape = (x: Tensor, shape: number[]): Tensor => apply(reshapeOp, [x], { shape });
/** [N, …] → [N, ∏…]. */
export const flatten = (x: Tensor): Tensor => reshape(x, [x.shape[0], x.size / x.shape[0]]);

export class Flatten extends Module {
  forward(x: Tensor): Tensor {
    return flatten(x);
  }
}
