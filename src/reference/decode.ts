/**
 * Token-at-a-time decoding for sampling: the same computation as
 * transformerLogits, but each new position reuses the keys and values of the
 * positions before it (a KV cache) instead of running the whole prefix again,
 * so a word of n letters costs n position-steps, not n²/2. Tested against
 * transformerLogits, which stays the oracle.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { gelu, geluTanh, layerNorm, linear } from './math.ts';
import { MLP_RATIO, type TransformerWeights } from './transformer.ts';

export interface Decoder {
  /** Feeds the token at the next position; returns that position's logits [vocab]. */
  push(token: number): Float64Array;
  /** Positions fed so far. */
  readonly length: number;
}

export function transformerDecoder(w: TransformerWeights): Decoder {
  const { vocab, context, width: d, heads, layers } = w.shape;
  const p = w.tensors;
  // GPT-2's architecture: tanh GELU and the head tied to tok.weight (see transformer.ts).
  const gpt2 = w.shape.arch === 'gpt2';
  const act = gpt2 ? geluTanh : gelu;
  const noBias = new Float64Array(vocab);
  const dh = d / heads;
  const scale = 1 / Math.sqrt(dh);
  // Per layer: the qkv rows of every position so far ([context × 3D]).
  const cache = Array.from({ length: layers }, () => new Float64Array(context * 3 * d));
  const scores = new Float64Array(context);
  let t = 0;
  return {
    get length() {
      return t;
    },
    push(token: number): Float64Array {
      if (t >= context)
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `the context holds ${context} positions; start a new decoder.`,
          { context },
        );
      if (!Number.isInteger(token) || token < 0 || token >= vocab)
        throw new RingtrainError(ErrorCode.InvalidArgument, `token ${token} is outside 0..${vocab - 1}.`, { token });
      let h = new Float64Array(d);
      for (let c = 0; c < d; c++) h[c] = p['tok.weight'][token * d + c] + p['pos.weight'][t * d + c];
      for (let n = 0; n < layers; n++) {
        const b = `blocks.${n}.`;
        const qkv = linear(
          layerNorm(h, 1, d, p[`${b}ln1.weight`], p[`${b}ln1.bias`]),
          1,
          d,
          p[`${b}qkv.weight`],
          p[`${b}qkv.bias`],
          3 * d,
        );
        cache[n].set(qkv, t * 3 * d);
        const y = new Float64Array(d);
        for (let hd = 0; hd < heads; hd++) {
          let max = -Infinity;
          for (let j = 0; j <= t; j++) {
            let s = 0;
            for (let c = 0; c < dh; c++) s += qkv[hd * dh + c] * cache[n][j * 3 * d + d + hd * dh + c];
            scores[j] = s * scale;
            max = Math.max(max, scores[j]);
          }
          let sum = 0;
          for (let j = 0; j <= t; j++) sum += scores[j] = Math.exp(scores[j] - max);
          for (let j = 0; j <= t; j++) {
            for (let c = 0; c < dh; c++)
              y[hd * dh + c] += (scores[j] / sum) * cache[n][j * 3 * d + 2 * d + hd * dh + c];
          }
        }
        const attn = linear(y, 1, d, p[`${b}proj.weight`], p[`${b}proj.bias`], d);
        h = h.map((v, i) => v + attn[i]);
        const hidden = linear(
          layerNorm(h, 1, d, p[`${b}ln2.weight`], p[`${b}ln2.bias`]),
          1,
          d,
          p[`${b}fc.weight`],
          p[`${b}fc.bias`],
          MLP_RATIO * d,
        ).map(act);
        const mlp = linear(hidden, 1, MLP_RATIO * d, p[`${b}out.weight`], p[`${b}out.bias`], d);
        h = h.map((v, i) => v + mlp[i]);
      }
      t++;
      const out = layerNorm(h, 1, d, p['lnf.weight'], p['lnf.bias']);
      return gpt2
        ? linear(out, 1, d, p['tok.weight'], noBias, vocab)
        : linear(out, 1, d, p['head.weight'], p['head.bias'], vocab);
    },
  };
}
