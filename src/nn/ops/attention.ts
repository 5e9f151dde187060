/**
 * attention: multi-head self-attention over a packed qkv [batch, T, 3·D]
 * (the output of one Linear(D, 3D), split q | k | v, heads side by side as
 * PyTorch's .view(b, t, H, D/H)), giving y [batch, T, D]: what
 * F.scaled_dot_product_attention(q, k, v, is_causal=True) returns, heads
 * merged back. One fused kernel; the probabilities are kept for backward.
 */
import { planAttentionBackward, planAttentionForward } from '../../gpu/kernels/attention.ts';
import { attentionBackwardRef, attentionRef } from '../../gpu/kernels/nn_reference.ts';
import { defineOp, requireF32, shapeError } from '../op.ts';

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
    if (qkv.length !== 3 || qkv[2] % 3 !== 0) throw shapeError(info, 'attention', 'needs qkv [batch, T, 3·width]', { qkv });
    const width = qkv[2] / 3;
    if (!Number.isInteger(attrs.heads) || attrs.heads < 1 || width % attrs.heads !== 0) {
      throw shapeError(info, 'attention', `width ${width} must be a multiple of the head count (${attrs.heads})`, { qkv });
    }
    return { shape: [qkv[0], qkv[1], width] };
  },
  plan(ctx, attrs) {
    const s = dims(ctx.inputShapes, attrs);
    const probsWords = s.batch * s.heads * s.T * s.T;
    const probs = ctx.scratch(probsWords, 'probs');
    const forward = [planAttentionForward(ctx.gpu, s, { qkv: ctx.input(0), y: ctx.output(), probs })];
    const [dy, dqkv] = [ctx.gradOut(), ctx.gradIn(0)];
    if (!dy || !dqkv) return { forward, backward: [] };
    return { forward, backward: planAttentionBackward(ctx.gpu, s, { qkv: ctx.input(0), probs, dy, dscores: ctx.scratch(probsWords, 'dscores'), dqkv }) };
  },
  cpu: {
    forward: ([qkv], shapes, attrs) => attentionRef(qkv, dims(shapes, attrs)).y,
    backward: ([qkv], shapes, attrs, _y, dy) => [attentionBackwardRef(qkv, dy, dims(shapes, attrs))],
  },
});
