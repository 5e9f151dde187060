/**
 * layerNorm: PyTorch's nn.LayerNorm over the last dimension, with weight and
 * bias [C]: y = (x − mean) / sqrt(var + eps) · weight + bias. Forward saves
 * (mean, rstd) per row; backward gives x, weight and bias their gradients.
 */
import { LAYER_NORM_EPS, planLayerNormBackward, planLayerNormForward } from '../../gpu/kernels/layernorm.ts';
import { layerNormBackwardRef, layerNormRef } from '../../gpu/kernels/nn_reference.ts';
import { defineOp, requireF32, shapeError } from '../op.ts';
import { gradOrScratch, rowsOf } from './grad-target.ts';

export interface LayerNormAttrs extends Record<string, unknown> {
  eps?: number;
}

export const layerNormOp = defineOp<LayerNormAttrs>({
  name: 'layerNorm',
  shape([x, w, b], _attrs, info) {
    requireF32(info, 'layerNorm', [x, w, b]);
    const c = x[x.length - 1];
    if (!w || !b || w.length !== 1 || b.length !== 1 || w[0] !== c || b[0] !== c) {
      throw shapeError(info, 'layerNorm', `weight and bias must both be [${c}] (x's last dimension)`, { x, weight: w ?? [], bias: b ?? [] });
    }
    return { shape: x };
  },
  plan(ctx, attrs) {
    const { rows, cols } = rowsOf(ctx.inputShapes[0]);
    const s = { rows, cols, eps: attrs.eps ?? LAYER_NORM_EPS };
    const stats = ctx.scratch(2 * rows, 'mean-rstd');
    const forward = [planLayerNormForward(ctx.gpu, s, { x: ctx.input(0), weight: ctx.input(1), bias: ctx.input(2), y: ctx.output(), stats })];
    const dy = ctx.gradOut();
    if (!dy || [0, 1, 2].every((i) => !ctx.gradIn(i))) return { forward, backward: [] };
    const backward = planLayerNormBackward(ctx.gpu, s, {
      x: ctx.input(0),
      weight: ctx.input(1),
      stats,
      dy,
      dx: gradOrScratch(ctx, 0, rows * cols, 'layerNorm dx'),
      dweight: gradOrScratch(ctx, 1, cols, 'layerNorm dweight'),
      dbias: gradOrScratch(ctx, 2, cols, 'layerNorm dbias'),
    }, { scratch: (words, label) => ctx.scratch(words, label) });
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
