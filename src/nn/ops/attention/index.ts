/**
 * attention: multi-head self-attention over a packed qkv [batch, T, 3·D]
 * (the output of one Linear(D, 3D), split q | k | v, heads side by side as
 * PyTorch's .view(b, t, H, D/H)), giving y [batch, T, D]: what
 * scaled_dot_product_attention(q, k, v, is_causal=True) returns, heads
 * merged back. Two fused kernels, chosen by shape (chooseAttentionKernel): for short contexts one
 * that keeps the probabilities [batch, heads, T, T] for backward, from T = 384 (TILED_FROM_T) a
 * tiled one that keeps only each query row's log-sum-exp (tiled-kernel.ts).
 */
import type { OpPlan, PlanContext } from '../../op.ts';
import { type AttentionShape, chooseAttentionKernel, planAttentionBackward, planAttentionForward } from './kernel.ts';
import { planTiledAttentionBackward, planTiledAttentionForward } from './tiled-kernel.ts';
import { attentionBackwardRef, attentionRef } from './reference.ts';
import { defineOp, requireF32, shapeError } from '../../op.ts';
import { apply, type Parameter, type Tensor } from '../../tensor.ts';
import { Module } from '../../module.ts';
import { Linear } from '../linear/index.ts';
import { positive } from '../../init.ts';
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';

export interface AttentionAttrs extends Record<string, unknown> {
  heads: number;
  /** Default true (GPT-style masking of later positions). */
  causal?: boolean;
}

function dims([[batch, T, threeD]]: readonly (readonly number[])[], attrs: AttentionAttrs) {
  return { batch, T, heads: attrs.heads, width: threeD / 3, causal: attrs.causal !== false };
}

export const attentionOp = defineOp<AttentionAttrs>({
  name: 'attention',
  shape([qkv], attrs, info) {
    requireF32(info, 'attention', [qkv]);
    if (qkv.length !== 3 || qkv[2] % 3 !== 0)
      throw shapeError(info, 'attention', 'needs qkv [batch, T, 3·width]', { qkv });
    const width = qkv[2] / 3;
    if (!Number.isInteger(attrs.heads) || attrs.heads < 1 || width % attrs.heads !== 0) {
      throw shapeError(info, 'attention', `width ${width} must be a multiple of the head count (${attrs.heads})`, {
        qkv,
      });
    }
    return { shape: [qkv[0], qkv[1], width] };
  },
  plan(ctx, attrs) {
    const s = dims(ctx.inputShapes, attrs);
    return chooseAttentionKernel(s) === 'tiled' ? planTiled(ctx, s) : planRows(ctx, s);
  },
  cpu: {
    forward: ([qkv], shapes, attrs) => attentionRef(qkv, dims(shapes, attrs)).y,
    backward: ([qkv], shapes, attrs, _y, dy) => [attentionBackwardRef(qkv, dy, dims(shapes, attrs))],
  },
});

/** The row kernel: probabilities and their gradient [batch, heads, T, T] as scratch. */
function planRows(ctx: PlanContext, s: AttentionShape): OpPlan {
  const probsWords = s.batch * s.heads * s.T * s.T;
  const probs = ctx.scratch(probsWords, 'probs');
  const forward = [planAttentionForward(ctx.gpu, s, { qkv: ctx.input(0), y: ctx.output(), probs })];
  const [dy, dqkv] = [ctx.gradOut(), ctx.gradIn(0)];
  if (!dy || !dqkv) return { forward, backward: [] };
  const dscores = ctx.scratch(probsWords, 'dscores');
  return { forward, backward: planAttentionBackward(ctx.gpu, s, { qkv: ctx.input(0), probs, dy, dscores, dqkv }) };
}

/** The tiled kernels: [batch, heads, T] of scratch for the row log-sum-exp and dy·y; backward reads the output. */
function planTiled(ctx: PlanContext, s: AttentionShape): OpPlan {
  const rows = s.batch * s.heads * s.T;
  const [qkv, y, lse] = [ctx.input(0), ctx.output(), ctx.scratch(rows, 'lse')];
  const forward = [planTiledAttentionForward(ctx.gpu, s, { qkv, y, lse })];
  const [dy, dqkv] = [ctx.gradOut(), ctx.gradIn(0)];
  if (!dy || !dqkv) return { forward, backward: [] };
  const delta = ctx.scratch(rows, 'delta');
  return { forward, backward: planTiledAttentionBackward(ctx.gpu, s, { qkv, y, lse, dy, delta, dqkv }) };
}

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Multi-head self-attention over packed qkv [batch, T, 3·D] → [batch, T, D] (causal unless told otherwise). */
export const attention = (qkv: Tensor, heads: number, causal = true): Tensor =>
  apply(attentionOp, [qkv], { heads, causal });

/**
 * Causal multi-head self-attention as in GPT-2: `qkv` = Linear(D, 3D) (q | k |
 * v side by side), the fused attention op, then `proj` = Linear(D, D).
 * x [batch, T, D] → [batch, T, D].
 */
export class CausalSelfAttention extends Module {
  readonly qkv: Linear;
  readonly proj: Linear;
  constructor(
    width: number,
    readonly heads: number,
  ) {
    super();
    positive('CausalSelfAttention', { width, heads });
    if (width % heads !== 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `CausalSelfAttention: width ${width} must be a multiple of heads ${heads}`,
        { width, heads },
      );
    this.qkv = new Linear(width, 3 * width);
    this.proj = new Linear(width, width);
  }
  forward(x: Tensor): Tensor {
    return this.proj.call(attention(this.qkv.call(x), this.heads));
  }
}
