/**
 * Data movement: permute (torch.permute; transpose is a permutation of two
 * dimensions), slice along one axis (x.narrow(axis, start, length)) and
 * concat along one axis (torch.cat), up to 4 dimensions, all through one
 * strided-copy kernel. Backward: the inverse permutation; a slice's window
 * written into a zeroed gradient; a concat's gradient sliced back apart.
 */
import { RingtrainError } from '../../../core/errors.ts';
import { inversePermutation, permutedShape, planConcat, planFill, planTranspose, planWindowCopy } from './kernel.ts';
import { concatRef, permuteRef, sliceBackwardRef, sliceRef } from './reference.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';

const MAX_RANK = 4;

export interface PermuteAttrs extends Record<string, unknown> {
  perm: number[];
}

export const permuteOp = defineOp<PermuteAttrs>({
  name: 'permute',
  shape([x], attrs, info) {
    requireF32(info, 'permute', [x]);
    if (x.length > MAX_RANK) throw shapeError(info, 'permute', `at most ${MAX_RANK} dimensions`, { x });
    try {
      return { shape: permutedShape(x, attrs.perm) };
    } catch (err) {
      if (err instanceof RingtrainError)
        throw shapeError(info, 'permute', `[${attrs.perm.join(', ')}] is not a permutation of x's dimensions`, { x });
      throw err;
    }
  },
  plan(ctx, attrs) {
    const shape = ctx.inputShapes[0];
    const forward = [planTranspose(ctx.gpu, ctx.input(0), shape, attrs.perm, ctx.output())];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    return {
      forward,
      backward: dy && dx ? [planTranspose(ctx.gpu, dy, ctx.outputShape, inversePermutation(attrs.perm), dx)] : [],
    };
  },
  cpu: {
    forward: ([x], [s], attrs) => permuteRef(x, s, attrs.perm),
    backward: (_x, [s], attrs, _y, dy) => [
      permuteRef(dy, permutedShape(s, attrs.perm), inversePermutation(attrs.perm)),
    ],
  },
});

export interface SliceAttrs extends Record<string, unknown> {
  axis: number;
  start: number;
  length: number;
}

export const sliceOp = defineOp<SliceAttrs>({
  name: 'slice',
  shape([x], { axis, start, length }, info) {
    requireF32(info, 'slice', [x]);
    const ok =
      x.length <= MAX_RANK &&
      Number.isInteger(axis) &&
      axis >= 0 &&
      axis < x.length &&
      Number.isInteger(start) &&
      Number.isInteger(length) &&
      start >= 0 &&
      length >= 1 &&
      start + length <= x[axis];
    if (!ok)
      throw shapeError(
        info,
        'slice',
        `window [${start}, ${start + length}) on axis ${axis} does not fit (at most ${MAX_RANK} dimensions)`,
        { x },
      );
    return { shape: x.map((d, i) => (i === axis ? length : d)) };
  },
  plan(ctx, { axis, start, length }) {
    const shape = ctx.inputShapes[0];
    const forward = [planWindowCopy(ctx.gpu, ctx.input(0), shape, axis, start, length, ctx.output(), false)];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    if (!dy || !dx) return { forward, backward: [] };
    return {
      forward,
      backward: [
        planFill(ctx.gpu, dx, sizeOf(shape)),
        planWindowCopy(ctx.gpu, dx, shape, axis, start, length, dy, true),
      ],
    };
  },
  cpu: {
    forward: ([x], [s], { axis, start, length }) => sliceRef(x, s, axis, start, length),
    backward: (_x, [s], { axis, start, length }, _y, dy) => [sliceBackwardRef(dy, s, axis, start, length)],
  },
});

export interface ConcatAttrs extends Record<string, unknown> {
  axis: number;
}

export const concatOp = defineOp<ConcatAttrs>({
  name: 'concat',
  shape(xs, { axis }, info) {
    requireF32(info, 'concat', xs);
    const first = xs[0];
    const named = Object.fromEntries(xs.map((s, i) => [`input ${i}`, s]));
    if (first.length > MAX_RANK || !Number.isInteger(axis) || axis < 0 || axis >= first.length)
      throw shapeError(info, 'concat', `axis ${axis} is not a dimension (at most ${MAX_RANK})`, named);
    if (xs.some((s) => s.length !== first.length || s.some((d, i) => i !== axis && d !== first[i])))
      throw shapeError(info, 'concat', `shapes must match except on axis ${axis}`, named);
    return { shape: first.map((d, i) => (i === axis ? xs.reduce((t, s) => t + s[axis], 0) : d)) };
  },
  plan(ctx, { axis }) {
    const shapes = ctx.inputShapes;
    const forward = planConcat(
      ctx.gpu,
      shapes.map((shape, i) => ({ buffer: ctx.input(i), shape })),
      axis,
      ctx.output(),
    );
    const dy = ctx.gradOut();
    const backward: Step[] = [];
    let start = 0;
    shapes.forEach((s, i) => {
      const dx = ctx.gradIn(i);
      if (dy && dx) backward.push(planWindowCopy(ctx.gpu, dy, ctx.outputShape, axis, start, s[axis], dx, false));
      start += s[axis];
    });
    return { forward, backward };
  },
  cpu: {
    forward: (xs, shapes, { axis }) =>
      concatRef(
        xs.map((data, i) => ({ data, shape: shapes[i] })),
        axis,
      ),
    backward(_xs, shapes, { axis }, _y, dy) {
      const outShape = shapes[0].map((d, i) => (i === axis ? shapes.reduce((t, s) => t + s[axis], 0) : d));
      let start = 0;
      return shapes.map((s) => {
        const part = sliceRef(dy, outShape, axis, start, s[axis]);
        start += s[axis];
        return part;
      });
    },
  },
});

// The functional forms, for `forward` methods (nn.F).
export const permute = (x: Tensor, perm: number[]): Tensor => apply(permuteOp, [x], { perm });
export const slice = (x: Tensor, axis: number, start: number, length: number): Tensor =>
  apply(sliceOp, [x], { axis, start, length });
export const concat = (xs: Tensor[], axis: number): Tensor => apply(concatOp, xs, { axis });
