/**
 * An independent CPU forward pass of the transformer workload (the words model), in
 * f64, from named tensors alone: the oracle the GPU model's logits are tested
 * against, and the engine of `ringtrain generate`.
 *
 * The model is the PyTorch module of /work/shared/gpu/gpt_ref.py, tensor for
 * tensor (names are its state-dict keys, Linear weights [out, in]):
 *   h = tok.weight[x] + pos.weight[0..T)
 *   per block N:  h += proj(attention(qkv(ln1(h))));  h += out(gelu(fc(ln2(h))))
 *   logits = head(lnf(h))
 * with causal multi-head attention (q, k, v = the three D-wide column groups
 * of qkv's output, head j = columns j·D/H … (j+1)·D/H of each, scores scaled
 * by 1/√(D/H)), exact-erf GELU and LayerNorm ε = 1e-5.
 *
 * The 'gpt2' architecture (src/engine/transformer.ts) is the same model with
 * GPT-2's two changes: GELU's tanh form, and no head: logits = lnf(h)·tok.weightᵀ.
 * A file's architecture shows in its tensors (a head.weight or none).
 *
 * The number of heads is not visible in the shapes; it comes from the caller
 * (default 4, the workload's).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { gelu, geluTanh, layerNorm, linear, logSoftmaxRow } from './math.ts';

export interface TransformerShape {
  vocab: number;
  /**
   * The longest sequence it reads. Weights read from a file (transformerWeights) take it from
   * pos.weight's rows: a GPT-2 trained on 128-token windows still has 1,024 learned positions,
   * and a file does not say the window it was trained on.
   */
  context: number;
  /** pos.weight's rows when longer than `context` (a model's training window); absent: `context`. */
  positions?: number;
  layers: number;
  width: number;
  heads: number;
  /** 'classic' when absent: the words workload's architecture. */
  arch?: 'classic' | 'gpt2';
}

/** The workload's model: 105,627 parameters. */
export const WORDS_TRANSFORMER: TransformerShape = { vocab: 27, context: 32, layers: 2, width: 64, heads: 4 };
/** nn.Linear(D, 4D) then nn.Linear(4D, D): the MLP's hidden width is this times D. */
export const MLP_RATIO = 4;

/** Every tensor of the model in the order nn.Module registers them (the state dict's order). */
export function transformerTensorShapes(s: TransformerShape): [string, number[]][] {
  const d = s.width;
  const shapes: [string, number[]][] = [
    ['tok.weight', [s.vocab, d]],
    ['pos.weight', [s.positions ?? s.context, d]],
  ];
  for (let n = 0; n < s.layers; n++) {
    const b = `blocks.${n}.`;
    shapes.push(
      [`${b}ln1.weight`, [d]],
      [`${b}ln1.bias`, [d]],
      [`${b}qkv.weight`, [3 * d, d]],
      [`${b}qkv.bias`, [3 * d]],
      [`${b}proj.weight`, [d, d]],
      [`${b}proj.bias`, [d]],
      [`${b}ln2.weight`, [d]],
      [`${b}ln2.bias`, [d]],
      [`${b}fc.weight`, [MLP_RATIO * d, d]],
      [`${b}fc.bias`, [MLP_RATIO * d]],
      [`${b}out.weight`, [d, MLP_RATIO * d]],
      [`${b}out.bias`, [d]],
    );
  }
  shapes.push(['lnf.weight', [d]], ['lnf.bias', [d]]);
  // GPT-2's output layer is tok.weight itself (tied): no tensor of its own.
  if (s.arch !== 'gpt2') shapes.push(['head.weight', [s.vocab, d]], ['head.bias', [s.vocab]]);
  return shapes;
}

export function transformerParamCount(s: TransformerShape): number {
  return transformerTensorShapes(s).reduce((n, [, shape]) => n + shape.reduce((a, b) => a * b, 1), 0);
}

export interface TransformerWeights {
  shape: TransformerShape;
  /** Each tensor's values by state-dict name (f64 copies: one array type keeps the loops fast). */
  tensors: Record<string, Float64Array>;
}

/**
 * Checks named tensors against the model and reads its size from them
 * (vocab and width from tok.weight, context from pos.weight, layers from the
 * blocks present). Names may carry a ringtrain checkpoint's `param/` prefix.
 */
export function transformerWeights(
  named: Record<string, { shape: readonly number[]; data: ArrayLike<number> }>,
  heads = WORDS_TRANSFORMER.heads,
  file = 'weights',
): TransformerWeights {
  const tensors: Record<string, { shape: readonly number[]; data: ArrayLike<number> }> = {};
  for (const [name, t] of Object.entries(named)) {
    if (name.startsWith('optim/')) continue; // optimizer state in a training checkpoint
    tensors[name.startsWith('param/') ? name.slice('param/'.length) : name] = t;
  }
  const tok = tensors['tok.weight'];
  const pos = tensors['pos.weight'];
  if (!tok || !pos || tok.shape.length !== 2 || pos.shape.length !== 2) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} is not a transformer's weights: it has no 2-D tok.weight and pos.weight (it holds ${Object.keys(tensors).slice(0, 6).join(', ')}${Object.keys(tensors).length > 6 ? ', …' : ''}).`,
      { file },
    );
  }
  let layers = 0;
  while (`blocks.${layers}.qkv.weight` in tensors) layers++;
  // No head: GPT-2's architecture (its head is tok.weight). A classic shape names no arch, as the words model's always
  // has.
  const shape: TransformerShape = {
    vocab: tok.shape[0],
    context: pos.shape[0],
    layers,
    width: tok.shape[1],
    heads,
    ...('head.weight' in tensors ? {} : { arch: 'gpt2' as const }),
  };
  if (!Number.isInteger(heads) || heads < 1 || shape.width % heads !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${heads} heads do not divide the width ${shape.width}; give a divisor of it.`,
      { heads, width: shape.width },
    );
  }
  const expected = transformerTensorShapes(shape);
  const out: Record<string, Float64Array> = {};
  for (const [name, want] of expected) {
    const t = tensors[name];
    if (!t)
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file} has no tensor '${name}' (a transformer of width ${shape.width} needs shape [${want}]).`,
        { file, tensor: name },
      );
    if (t.shape.length !== want.length || t.shape.some((v, i) => v !== want[i])) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: tensor '${name}' has shape [${t.shape}], but a transformer of width ${shape.width} needs [${want}].`,
        {
          file,
          tensor: name,
          shape: [...t.shape],
          expectedShape: want,
        },
      );
    }
    for (let i = 0; i < t.data.length; i++) {
      if (!Number.isFinite(t.data[i]))
        throw new RingtrainError(
          ErrorCode.BadCheckpoint,
          `${file}: tensor '${name}' holds ${t.data[i]} at ${i}; the run that saved it diverged.`,
          { file, tensor: name, index: i },
        );
    }
    out[name] = Float64Array.from(t.data);
  }
  const unknown = Object.keys(tensors).filter((n) => !(n in out));
  if (unknown.length > 0)
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} has tensors a transformer does not: ${unknown.join(', ')}.`,
      { file, unknown },
    );
  return { shape, tensors: out };
}

/** Causal multi-head attention over one sequence: qkv[T × 3D] → y[T × D]. */
function causalAttention(qkv: Float64Array, t: number, d: number, heads: number): Float64Array {
  const dh = d / heads;
  const scale = 1 / Math.sqrt(dh);
  const y = new Float64Array(t * d);
  const weights = new Float64Array(t);
  for (let h = 0; h < heads; h++) {
    const qOff = h * dh,
      kOff = d + h * dh,
      vOff = 2 * d + h * dh;
    for (let i = 0; i < t; i++) {
      // Query i sees keys 0..i only.
      let max = -Infinity;
      for (let j = 0; j <= i; j++) {
        let s = 0;
        for (let c = 0; c < dh; c++) s += qkv[i * 3 * d + qOff + c] * qkv[j * 3 * d + kOff + c];
        weights[j] = s * scale;
        max = Math.max(max, weights[j]);
      }
      let sum = 0;
      for (let j = 0; j <= i; j++) sum += weights[j] = Math.exp(weights[j] - max);
      for (let j = 0; j <= i; j++) {
        const p = weights[j] / sum;
        for (let c = 0; c < dh; c++) y[i * d + h * dh + c] += p * qkv[j * 3 * d + vOff + c];
      }
    }
  }
  return y;
}

/**
 * Logits [T × vocab] of one sequence of T ≤ context token ids. Position i's
 * logits depend on tokens 0..i only, so a prefix's logits are the same in
 * any longer sequence that starts with it.
 */
export function transformerLogits(w: TransformerWeights, tokens: ArrayLike<number>): Float64Array {
  const { vocab, context, width: d, heads } = w.shape;
  const t = tokens.length;
  if (t < 1 || t > context)
    throw new RingtrainError(ErrorCode.InvalidArgument, `a sequence of ${t} tokens; the model reads 1 to ${context}.`, {
      tokens: t,
      context,
    });
  const p = w.tensors;
  const gpt2 = w.shape.arch === 'gpt2';
  const act = gpt2 ? geluTanh : gelu;
  let h = new Float64Array(t * d);
  for (let i = 0; i < t; i++) {
    const id = tokens[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocab)
      throw new RingtrainError(ErrorCode.InvalidArgument, `token ${id} at position ${i} is outside 0..${vocab - 1}.`, {
        position: i,
        token: id,
      });
    for (let c = 0; c < d; c++) h[i * d + c] = p['tok.weight'][id * d + c] + p['pos.weight'][i * d + c];
  }
  for (let n = 0; n < w.shape.layers; n++) {
    const b = `blocks.${n}.`;
    const qkv = linear(
      layerNorm(h, t, d, p[`${b}ln1.weight`], p[`${b}ln1.bias`]),
      t,
      d,
      p[`${b}qkv.weight`],
      p[`${b}qkv.bias`],
      3 * d,
    );
    const attn = linear(causalAttention(qkv, t, d, heads), t, d, p[`${b}proj.weight`], p[`${b}proj.bias`], d);
    h = h.map((v, i) => v + attn[i]);
    const hidden = linear(
      layerNorm(h, t, d, p[`${b}ln2.weight`], p[`${b}ln2.bias`]),
      t,
      d,
      p[`${b}fc.weight`],
      p[`${b}fc.bias`],
      MLP_RATIO * d,
    ).map(act);
    const mlp = linear(hidden, t, MLP_RATIO * d, p[`${b}out.weight`], p[`${b}out.bias`], d);
    h = h.map((v, i) => v + mlp[i]);
  }
  const out = layerNorm(h, t, d, p['lnf.weight'], p['lnf.bias']);
  return gpt2
    ? linear(out, t, d, p['tok.weight'], new Float64Array(vocab), vocab)
    : linear(out, t, d, p['head.weight'], p['head.bias'], vocab);
}

export interface SequenceLoss {
  /** Σ −log p(target) over the counted positions, in nats. */
  totalNats: number;
  /** Positions whose target is not ignored (< 0). */
  positions: number;
  /** totalNats / positions: the workload's validation metric (nats per character). */
  loss: number;
}

/**
 * Cross-entropy of `count` examples of `context` positions each (inputs and
 * targets row-major, targets < 0 ignored), summed over every counted position
 * and divided by their number. Each example runs only up to its last counted
 * target: by causality the padding after it changes nothing before it.
 */
export function transformerLoss(
  w: TransformerWeights,
  inputs: ArrayLike<number>,
  targets: ArrayLike<number>,
  context: number,
): SequenceLoss {
  const count = targets.length / context;
  if (!Number.isInteger(count) || inputs.length !== targets.length) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${inputs.length} inputs and ${targets.length} targets are not whole examples of ${context} positions.`,
      { inputs: inputs.length, targets: targets.length, context },
    );
  }
  const { vocab } = w.shape;
  const logProbs = new Float64Array(vocab);
  let totalNats = 0;
  let positions = 0;
  for (let e = 0; e < count; e++) {
    let last = -1;
    for (let i = 0; i < context; i++) if (targets[e * context + i] >= 0) last = i;
    if (last < 0) continue;
    const logits = transformerLogits(
      w,
      Array.from({ length: last + 1 }, (_, i) => inputs[e * context + i]),
    );
    for (let i = 0; i <= last; i++) {
      const y = targets[e * context + i];
      if (y < 0) continue;
      if (!Number.isInteger(y) || y >= vocab)
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `target ${y} of example ${e} position ${i} is outside 0..${vocab - 1}.`,
          { example: e, position: i, target: y },
        );
      logSoftmaxRow(logits, i, vocab, logProbs);
      totalNats -= logProbs[y];
      positions++;
    }
  }
  return { totalNats, positions, loss: positions > 0 ? totalNats / positions : NaN };
}
