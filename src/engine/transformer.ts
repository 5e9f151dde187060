/**
 * The built-in transformer of the words workload (a character model of English words, checked against PyTorch), on the model API:
 * the PyTorch module of docs/MODELS.md layer for layer, so the layout IS its
 * state dict (tok.weight, pos.weight, blocks.N.{ln1,qkv,proj,ln2,fc,out}, lnf,
 * head; Linear weights [out, in]):
 *
 *   h = tok[idx] + pos                      [B, T, D]
 *   h += proj(attention(qkv(ln1(h))))       causal, H heads (one fused op)
 *   h += out(gelu(fc(ln2(h))))              exact GELU
 *   logits = head(lnf(h))                   [B, T, vocab]
 *
 * Inputs are token ids (u32 on the GPU; f32 rows in the Model contract),
 * targets one per position with -1 ignored (padding after a word's end).
 * Initialisation is PyTorch's default scheme: embeddings N(0, 1), LayerNorm
 * 1 and 0, Linear U(±1/√in).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Linear } from '../nn/ops/index.ts';
import { Module } from '../nn/module.ts';
import { F } from '../nn/functional.ts';
import { addBroadcastOp, attentionOp, embeddingOp, geluOp, layerNormOp } from '../nn/ops/index.ts';
import { apply, Parameter, type Tensor } from '../nn/tensor.ts';
import { checkTargets, planCrossEntropy } from '../nn/ops/cross-entropy/kernel.ts';
import { crossEntropyRef } from '../nn/ops/cross-entropy/reference.ts';
import type { Loss } from '../nn/loss.ts';
import { GraphModel } from './graph-model.ts';
import type { TransformerSpec } from './model.ts';

export type { TransformerSpec };

/** The words workload's model: 105,627 parameters. */
export const TRANSFORMER_DEFAULTS: Required<TransformerSpec> = { kind: 'transformer', seed: 1, vocab: 27, context: 32, layers: 2, width: 64, heads: 4 };

export function resolveTransformerSpec(spec: Partial<TransformerSpec> = {}): Required<TransformerSpec> {
  const s: Required<TransformerSpec> = { ...TRANSFORMER_DEFAULTS, ...spec, kind: 'transformer' };
  for (const key of ['vocab', 'context', 'layers', 'width', 'heads'] as const) {
    if (!Number.isInteger(s[key]) || s[key] < 1) throw new RingtrainError(ErrorCode.InvalidArgument, `transformer: ${key} must be a positive integer, got ${s[key]}`, { [key]: s[key] });
  }
  if (s.width % s.heads !== 0) throw new RingtrainError(ErrorCode.InvalidArgument, `transformer: width ${s.width} must be a multiple of heads ${s.heads}`, { width: s.width, heads: s.heads });
  return s;
}

/**
 * Cross-entropy over every position with target −1 ignored, the mean taken
 * over the counted positions (F.cross_entropy(..., ignore_index=-1)). The
 * kernel writes [mean loss, correct, counted] into the results buffer.
 */
export const sequenceCrossEntropy: Loss = {
  name: 'cross-entropy-ignore',
  encodeTargets(targets, rows, classes, out) {
    if (targets.length !== rows) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `expected ${rows} targets (one per position), got ${targets.length}`, { expected: rows, got: targets.length });
    }
    // −1 travels as the same 32 bits; the shader reads the buffer as i32.
    out.set(new Uint32Array(checkTargets(targets, rows, classes).buffer));
    return out;
  },
  plan(gpu, io) {
    const rowStats = io.scratch(3 * io.rows, 'row-stats');
    return planCrossEntropy(gpu, { logits: io.output, targets: io.targets, dlogits: io.dOutput, rowStats, result: io.results }, io.rows, io.classes, { scratch: io.scratch });
  },
  cpu(output, targets, rows, classes) {
    const r = crossEntropyRef(output, Array.from(targets), rows, classes);
    return { loss: r.loss, dOutput: r.dlogits };
  },
};

const normal = (out: Float32Array, rand: { normal: () => number }) => {
  for (let i = 0; i < out.length; i++) out[i] = rand.normal();
};

/** nn.Embedding: weight [count, dim], N(0, 1). */
class Embedding extends Module {
  readonly weight: Parameter;
  constructor(count: number, dim: number) {
    super();
    this.weight = new Parameter([count, dim], normal);
  }
  forward(ids: Tensor): Tensor {
    return apply(embeddingOp, [ids, this.weight], {});
  }
}

/** nn.LayerNorm over the last dimension: weight 1, bias 0. */
class LayerNorm extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(dim: number) {
    super();
    this.weight = new Parameter([dim], (out) => out.fill(1));
    this.bias = new Parameter([dim], (out) => out.fill(0));
  }
  forward(x: Tensor): Tensor {
    return apply(layerNormOp, [x, this.weight, this.bias], {});
  }
}

class Block extends Module {
  readonly ln1: LayerNorm;
  readonly qkv: Linear;
  readonly proj: Linear;
  readonly ln2: LayerNorm;
  readonly fc: Linear;
  readonly out: Linear;
  constructor(width: number, private readonly heads: number) {
    super();
    this.ln1 = new LayerNorm(width);
    this.qkv = new Linear(width, 3 * width);
    this.proj = new Linear(width, width);
    this.ln2 = new LayerNorm(width);
    this.fc = new Linear(width, 4 * width);
    this.out = new Linear(4 * width, width);
  }
  forward(x: Tensor): Tensor {
    const y = apply(attentionOp, [this.qkv.call(this.ln1.call(x))], { heads: this.heads, causal: true });
    const h = F.add(x, this.proj.call(y));
    return F.add(h, this.out.call(apply(geluOp, [this.fc.call(this.ln2.call(h))], {})));
  }
}

export class TransformerModule extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: Block[];
  readonly lnf: LayerNorm;
  readonly head: Linear;
  constructor(s: Required<TransformerSpec>) {
    super();
    this.tok = new Embedding(s.vocab, s.width);
    this.pos = new Embedding(s.context, s.width);
    this.blocks = Array.from({ length: s.layers }, () => new Block(s.width, s.heads));
    this.lnf = new LayerNorm(s.width);
    this.head = new Linear(s.width, s.vocab);
  }
  forward(ids: Tensor): Tensor {
    // [B, T, D] + [T, D]: every sequence gets the same position embeddings.
    let h = apply(addBroadcastOp, [this.tok.call(ids), this.pos.weight], {});
    for (const block of this.blocks) h = block.call(h);
    return this.head.call(this.lnf.call(h));
  }
}

export class Transformer extends GraphModel {
  /** vocab, context, layers, width, heads: what the CPU reference needs besides the weights. */
  readonly shape: { vocab: number; context: number; layers: number; width: number; heads: number };
  constructor(gpu: Gpu, spec: Partial<TransformerSpec> = {}) {
    const s = resolveTransformerSpec(spec);
    const { kind: _kind, seed, ...options } = s;
    super(gpu, {
      identity: { name: 'transformer', options: { seed, ...options } },
      module: new TransformerModule(s),
      inputShape: [s.context],
      inputDType: 'u32',
      classes: s.vocab,
      seed,
      loss: sequenceCrossEntropy,
    });
    this.shape = { vocab: s.vocab, context: s.context, layers: s.layers, width: s.width, heads: s.heads };
  }
}
