/**
 * dropout: inverted dropout (nn.Dropout in training mode) with a mask hashed
 * from (seed, step, index): never stored, identical in forward and backward,
 * reproducible from the seed. The step counter is a GPU word of this op's,
 * advanced at the start of every recorded forward, so the first forward
 * after planning uses step 1, the next step 2, and so on; the CPU oracle
 * models that first step. `training: false` (evaluation) is the identity.
 */
import { planDropoutAdvance, planDropoutBackward, planDropoutForward } from './kernel.ts';
import { dropoutRef } from './reference.ts';
import { defineOp, requireF32, shapeError, type Step } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';

export interface DropoutAttrs extends Record<string, unknown> {
  p: number;
  seed: number;
  training?: boolean;
}

/** The step the oracle models: the first forward after the plan was made. */
const ORACLE_STEP = 1;

const active = (attrs: DropoutAttrs) => attrs.training !== false && attrs.p > 0;

export const dropoutOp = defineOp<DropoutAttrs>({
  name: 'dropout',
  shape([x], attrs, info) {
    requireF32(info, 'dropout', [x]);
    if (!(attrs.p >= 0 && attrs.p < 1)) throw shapeError(info, 'dropout', `p must be in [0, 1), got ${attrs.p}`, { x });
    if (!Number.isInteger(attrs.seed) || attrs.seed < 0 || attrs.seed >= 2 ** 32)
      throw shapeError(info, 'dropout', `seed must be an integer in [0, 2^32), got ${attrs.seed}`, { x });
    return { shape: x };
  },
  plan(ctx, attrs) {
    const n = sizeOf(ctx.outputShape);
    const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    if (!active(attrs)) {
      const copy = (src: typeof dy, dst: typeof dy): Step[] =>
        src && dst ? [{ copy: { src, dst, bytes: n * 4 } }] : [];
      return { forward: copy(ctx.input(0), ctx.output()), backward: copy(dy, dx) };
    }
    const o = { n, p: attrs.p, seed: attrs.seed };
    const state = ctx.scratch(1, 'step');
    const forward = [
      planDropoutAdvance(ctx.gpu, state),
      planDropoutForward(ctx.gpu, o, state, ctx.input(0), ctx.output()),
    ];
    return { forward, backward: dy && dx ? [planDropoutBackward(ctx.gpu, o, state, dy, dx)] : [] };
  },
  cpu: {
    forward: ([x], _s, attrs) => (active(attrs) ? dropoutRef(x, attrs.p, attrs.seed, ORACLE_STEP) : x.slice()),
    backward: (_x, _s, attrs, _y, dy) => [
      active(attrs) ? dropoutRef(dy, attrs.p, attrs.seed, ORACLE_STEP) : dy.slice(),
    ],
  },
});

// The functional form, for `forward` methods (nn.F).
/** Inverted dropout with a seeded mask (identity when training is false or p is 0). */
export const dropout = (x: Tensor, p: number, seed: number, training = true): Tensor =>
  apply(dropoutOp, [x], { p, seed, training });

/**
 * nn.Dropout(p) with a seeded mask in train mode; the identity in eval mode
 * (`eval()`, as GraphModel's predict and evaluate trace it). `training` is the
 * initial mode.
 */
export class Dropout extends Module {
  constructor(
    readonly p: number,
    readonly seed = 0,
    training = true,
  ) {
    super();
    this.training = training;
  }
  forward(x: Tensor): Tensor {
    return dropout(x, this.p, this.seed, this.training);
  }
}
