/**
 * Elementwise ops with NumPy/PyTorch broadcasting (up to 4 dimensions):
 *   addBroadcast  a + alpha·b   (alpha −1 subtracts; e.g. x + pos_embedding)
 *   mul           a · b
 *   scale         alpha · x
 * The gradient of an input that was broadcast is dy summed over the
 * dimensions it was stretched along (times the other factor for mul).
 */
import { broadcastShape, planBroadcastBinary, planBroadcastReduce, planScaleTo } from './kernel.ts';
import { broadcastBinaryRef, broadcastReduceRef } from './reference.ts';
import { RingtrainError } from '../../../core/errors.ts';
import { defineOp, requireF32, shapeError, type ShapeInfo, type Step } from '../../op.ts';
import { apply, type Parameter, type Shape, sizeOf, type Tensor } from '../../tensor.ts';

export interface AddAttrs extends Record<string, unknown> {
  alpha?: number;
}

function joined(info: ShapeInfo, op: string, a: Shape, b: Shape): number[] {
  requireF32(info, op, [a, b]);
  try {
    return broadcastShape(a, b, op);
  } catch (err) {
    if (err instanceof RingtrainError)
      throw shapeError(info, op, 'shapes do not broadcast (each dimension must match or be 1; at most 4 dimensions)', {
        a,
        b,
      });
    throw err;
  }
}

export const addBroadcastOp = defineOp<AddAttrs>({
  name: 'addBroadcast',
  // Backward sums ∂y over the broadcast dimensions; no value is read.
  backwardReads: () => ({ inputs: [], output: false }),
  shape: ([a, b], _attrs, info) => ({ shape: joined(info, 'addBroadcast', a, b) }),
  plan(ctx, attrs) {
    const [as, bs] = ctx.inputShapes;
    const alpha = attrs.alpha ?? 1;
    const forward: Step[] = [
      planBroadcastBinary(ctx.gpu, 'add', ctx.input(0), as, ctx.input(1), bs, ctx.output(), { alpha }),
    ];
    const dy = ctx.gradOut();
    const backward: Step[] = [];
    const scratch = (words: number, label: string) => ctx.scratch(words, label, 'backward');
    const [da, db] = [ctx.gradIn(0), ctx.gradIn(1)];
    if (dy && da) backward.push(...planBroadcastReduce(ctx.gpu, dy, ctx.outputShape, da, as, { scratch }));
    if (dy && db) backward.push(...planBroadcastReduce(ctx.gpu, dy, ctx.outputShape, db, bs, { alpha, scratch }));
    return { forward, backward };
  },
  cpu: {
    forward: ([a, b], [as, bs], attrs) => broadcastBinaryRef('add', a, as, b, bs, attrs.alpha ?? 1),
    backward(_x, [as, bs], attrs, y, dy) {
      const shape = broadcastShape(as, bs);
      return [broadcastReduceRef(dy, shape, as), broadcastReduceRef(dy, shape, bs, attrs.alpha ?? 1)];
    },
  },
});

export const mulOp = defineOp<Record<string, never>>({
  name: 'mul',
  shape: ([a, b], _attrs, info) => ({ shape: joined(info, 'mul', a, b) }),
  plan(ctx) {
    const [as, bs] = ctx.inputShapes;
    const [a, b] = [ctx.input(0), ctx.input(1)];
    const forward: Step[] = [planBroadcastBinary(ctx.gpu, 'mul', a, as, b, bs, ctx.output())];
    const dy = ctx.gradOut();
    const backward: Step[] = [];
    const scratch = (words: number, label: string) => ctx.scratch(words, label);
    const [da, db] = [ctx.gradIn(0), ctx.gradIn(1)];
    if (dy && da)
      backward.push(
        ...planBroadcastReduce(ctx.gpu, dy, ctx.outputShape, da, as, { other: { buffer: b, shape: bs }, scratch }),
      );
    if (dy && db)
      backward.push(
        ...planBroadcastReduce(ctx.gpu, dy, ctx.outputShape, db, bs, { other: { buffer: a, shape: as }, scratch }),
      );
    return { forward, backward };
  },
  cpu: {
    forward: ([a, b], [as, bs]) => broadcastBinaryRef('mul', a, as, b, bs),
    backward([a, b], [as, bs], _attrs, _y, dy) {
      const shape = broadcastShape(as, bs);
      return [
        broadcastReduceRef(dy, shape, as, 1, { data: b, shape: bs }),
        broadcastReduceRef(dy, shape, bs, 1, { data: a, shape: as }),
      ];
    },
  },
});

export interface ScaleAttrs extends Record<string, unknown> {
  alpha: number;
}

export const scaleOp = defineOp<ScaleAttrs>({
  name: 'scale',
  shape([x], attrs, info) {
    requireF32(info, 'scale', [x]);
    if (!Number.isFinite(attrs.alpha))
      throw shapeError(info, 'scale', `alpha must be a finite number, got ${attrs.alpha}`, { x });
    return { shape: x };
  },
  plan(ctx, attrs) {
    const n = sizeOf(ctx.outputShape);
    const forward = [planScaleTo(ctx.gpu, attrs.alpha, ctx.input(0), ctx.output(), n)];
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    return { forward, backward: dy && dx ? [planScaleTo(ctx.gpu, attrs.alpha, dy, dx, n)] : [] };
  },
  cpu: {
    forward: ([x], _s, attrs) => x.map((v) => attrs.alpha * v),
    backward: (_x, _s, attrs, _y, dy) => [dy.map((g) => attrs.alpha * g)],
  },
});

type T = Tensor | Parameter;

// The functional forms, for `forward` methods (nn.F).
/** a + alpha·b with broadcasting (trailing dimensions, NumPy rules). */
export const addBroadcast = (a: T, b: T, alpha?: number): Tensor =>
  apply(addBroadcastOp, [a, b], alpha === undefined ? {} : { alpha });
export const mul = (a: T, b: T): Tensor => apply(mulOp, [a, b], {});
export const scale = (x: Tensor, alpha: number): Tensor => apply(scaleOp, [x], { alpha });
