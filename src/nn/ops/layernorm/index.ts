/**
 * layerNorm: PyTorch's nn.LayerNorm over the last dimension, with weight and
 * bias [C]: y = (x − mean) / sqrt(var + eps) · weight + bias. Forward saves
 * (mean, rstd) per row; backward gives x, weight and bias their gradients.
 */
import { LAYER_NORM_EPS, planLayerNormBackward, planLayerNormForward } from './kernel.ts';
import { layerNormBackwardRef, layerNormRef } from './reference.ts';
import { defineOp, requireF32, shapeError } from '../../op.ts';
import { gradOrScratch, rowsOf } from '../grad-target.ts';
import { apply, Parameter, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { positive, zeros } from '../../init.ts';

export interface LayerNormAttrs extends Record<string, unknown> {
  eps?: number;
}

export const layerNormOp = defineOp<LayerNormAttrs>({
  name: 'layerNorm',
  // x and the saved statistics (scratch) give x̂; the output is not read again.
  backwardReads: () => ({ inputs: [0, 1], output: false }),
  shape([x, w, b], _attrs, info) {
    requireF32(info, 'layerNorm', [x, w, b]);
    const c = x[x.length - 1];
    if (!w || !b || w.length !== 1 || b.length !== 1 || w[0] !== c || b[0] !== c) {
      throw shapeError(info, 'layerNorm', `weight and bias must both be [${c}] (x's last dimension)`, {
        x,
        weight: w ?? [],
        bias: b ?? [],
      });
    }
    return { shape: x };
  },
  plan(ctx, attrs) {
    const { rows, cols } = rowsOf(ctx.inputShapes[0]);
    const s = { rows, cols, eps: attrs.eps ?? LAYER_NORM_EPS };
    const stats = ctx.scratch(2 * rows, 'mean-rstd');
    const forward = [
      planLayerNormForward(ctx.gpu, s, {
        x: ctx.input(0),
        weight: ctx.input(1),
        bias: ctx.input(2),
        y: ctx.output(),
        stats,
      }),
    ];
    const dy = ctx.gradOut();
    if (!dy || [0, 1, 2].every((i) => !ctx.gradIn(i))) return { forward, backward: [] };
    const backward = planLayerNormBackward(
      ctx.gpu,
      s,
      {
        x: ctx.input(0),
        weight: ctx.input(1),
        stats,
        dy,
        dx: gradOrScratch(ctx, 0, rows * cols, 'layerNorm dx'),
        dweight: gradOrScratch(ctx, 1, cols, 'layerNorm dweight'),
        dbias: gradOrScratch(ctx, 2, cols, 'layerNorm dbias'),
      },
      { scratch: (words, label) => ctx.scratch(words, label, 'backward') },
    );
    return { forward, backward };
  },
  cpu: {
    forward([x, w, b], [xs], attrs) {
      const { rows, cols } = rowsOf(xs);
      return layerNormRef(x, w, b, rows, cols, attrs.eps ?? LAYER_NORM_EPS).y;
    },
    backward([x, w], [xs], attrs, _y, dy) {
      const { rows, cols } = rowsOf(xs);
      const g = layerNormBackwardRef(x, w, dy, rows, cols, attrs.eps ?? LAYER_NORM_EPS);
      return [g.dx, g.dw, g.db];
    },
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Layer norm over the last dimension (nn.LayerNorm). */
export const layerNorm = (x: Tensor, weight: T, bias: T, eps?: number): Tensor =>
  apply(layerNormOp, [x, weight, bias], eps === undefined ? {} : { eps });

/** nn.LayerNorm(dim): weight ones, bias zeros. */
export class LayerNorm extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(
    dim: number,
    readonly eps = 1e-5,
  ) {
    super();
    positive('LayerNorm', { dim });
    this.weight = new Parameter([dim], (out) => out.fill(1));
    this.bias = new Parameter([dim], zeros);
  }
  forward(x: Tensor): Tensor {
    return layerNorm(x, this.weight, this.bias, this.eps);
  }
}
