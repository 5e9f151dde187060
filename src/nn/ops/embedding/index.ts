/**
 * embedding: PyTorch's nn.Embedding lookup, out[..., :] = weight[ids[...], :]
 * for u32 ids [...] and weight [vocab, dim]. Backward scatter-adds into the
 * weight's gradient without atomics (deterministic). Ids are data: check
 * them on upload with checkIds (kernel.ts).
 */
import { planEmbeddingBackward, planEmbeddingForward } from './kernel.ts';
import { embeddingBackwardRef, embeddingRef } from './reference.ts';
import { defineOp, shapeError } from '../../op.ts';
import { apply, Parameter, sizeOf, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { positive, streamed } from '../../init.ts';

export const embeddingOp = defineOp<Record<string, never>>({
  name: 'embedding',
  // The scatter reads the ids and the output's gradient, never the rows it gathered.
  backwardReads: () => ({ inputs: [0], output: false }),
  shape([ids, weight], _attrs, info) {
    if (info.dtypes[0] !== 'u32' || info.dtypes[1] !== 'f32')
      throw shapeError(info, 'embedding', 'needs u32 ids and an f32 weight', { ids, weight });
    if (weight.length !== 2) throw shapeError(info, 'embedding', 'weight must be [vocab, dim]', { ids, weight });
    return { shape: [...ids, weight[1]] };
  },
  plan(ctx) {
    const [vocab, dim] = ctx.inputShapes[1];
    const s = { rows: sizeOf(ctx.inputShapes[0]), vocab, dim };
    const forward = planEmbeddingForward(ctx.gpu, s, ctx.input(0), ctx.input(1), ctx.output());
    const [dy, dw] = [ctx.gradOut(), ctx.gradIn(1)];
    return {
      forward,
      backward:
        dy && dw
          ? planEmbeddingBackward(ctx.gpu, s, ctx.input(0), dy, dw, false, (words, label) =>
              ctx.scratch(words, label, 'backward'),
            )
          : [],
    };
  },
  cpu: {
    forward: ([ids, w], [idShape, [, dim]]) => embeddingRef(ids, w, sizeOf(idShape), dim),
    backward: ([ids], [idShape, [vocab, dim]], _a, _y, dy) => [
      null,
      embeddingBackwardRef(ids, dy, sizeOf(idShape), vocab, dim),
    ],
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Rows of `weight` [vocab, dim] picked by u32 `ids` […] → […, dim]. */
export const embedding = (ids: Tensor, weight: T): Tensor => apply(embeddingOp, [ids, weight], {});

/** nn.Embedding(count, dim): weight [count, dim], standard-normal init as PyTorch's. Input: u32 ids. */
export class Embedding extends Module {
  readonly weight: Parameter;
  constructor(count: number, dim: number) {
    super();
    positive('Embedding', { count, dim });
    this.weight = new Parameter(
      [count, dim],
      streamed((out, rand) => {
        for (let i = 0; i < out.length; i++) out[i] = rand.normal();
      }),
    );
  }
  forward(ids: Tensor): Tensor {
    return embedding(ids, this.weight);
  }
}
