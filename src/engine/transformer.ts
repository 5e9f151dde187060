/**
 * The built-in transformer (issue 9's words workload): a decoder-only GPT
 * over characters, pre-LayerNorm, learned token and position embeddings,
 * GELU MLPs, a final LayerNorm and a linear head. Module and parameter names
 * are those of the PyTorch reference (/work/shared/gpu/gpt_ref.py), so a
 * checkpoint's tensors are its state dict:
 *
 *   tok.weight [V, D], pos.weight [T, D],
 *   blocks.N.{ln1, qkv [3D, D], proj [D, D], ln2, fc [4D, D], out [D, 4D]}.{weight, bias},
 *   lnf.{weight, bias}, head.{weight [V, D], bias}
 *
 * Input: token ids [batch, T] (u32; the Model API takes them as floats);
 * output logits [batch, T, V]; loss: cross-entropy over positions with
 * target -1 ignored (padding). Inits are PyTorch's defaults.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import * as F from '../nn/functional.ts';
import { Embedding, LayerNorm, Linear } from '../nn/layers.ts';
import { crossEntropyIgnore } from '../nn/loss.ts';
import { Module, Sequential } from '../nn/module.ts';
import type { Tensor } from '../nn/tensor.ts';
import { GraphModel } from './graph-model.ts';

export interface TransformerSpec {
  kind: 'transformer';
  seed?: number;
  /** Symbols (27: newline and a–z). */
  vocab?: number;
  /** Positions per example. */
  context?: number;
  width?: number;
  heads?: number;
  layers?: number;
}

export const TRANSFORMER_DEFAULTS: Required<TransformerSpec> = { kind: 'transformer', seed: 1, vocab: 27, context: 32, width: 64, heads: 4, layers: 2 };

export function transformerSpec(spec: Partial<TransformerSpec> = {}): Required<TransformerSpec> {
  const s: Required<TransformerSpec> = { ...TRANSFORMER_DEFAULTS, ...spec, kind: 'transformer' };
  for (const key of ['vocab', 'context', 'width', 'heads', 'layers'] as const) {
    if (!Number.isInteger(s[key]) || s[key] < 1) throw new RingtrainError(ErrorCode.InvalidArgument, `transformer: ${key} must be a positive integer, got ${s[key]}`, { [key]: s[key] });
  }
  if (s.width % s.heads !== 0) throw new RingtrainError(ErrorCode.InvalidArgument, `transformer: width ${s.width} must be a multiple of heads ${s.heads}`, { width: s.width, heads: s.heads });
  if (!Number.isInteger(s.seed)) throw new RingtrainError(ErrorCode.InvalidArgument, `transformer: seed must be an integer, got ${s.seed}`);
  return s;
}

/** One pre-LayerNorm block: x + proj(attention(qkv(ln1(x)))), then x + out(gelu(fc(ln2(x)))). */
export class Block extends Module {
  readonly ln1: LayerNorm;
  readonly qkv: Linear;
  readonly proj: Linear;
  readonly ln2: LayerNorm;
  readonly fc: Linear;
  readonly out: Linear;
  constructor(width: number, readonly heads: number) {
    super();
    this.ln1 = new LayerNorm(width);
    this.qkv = new Linear(width, 3 * width);
    this.proj = new Linear(width, width);
    this.ln2 = new LayerNorm(width);
    this.fc = new Linear(width, 4 * width);
    this.out = new Linear(4 * width, width);
  }
  forward(x: Tensor): Tensor {
    const h = F.add(x, this.proj.call(F.attention(this.qkv.call(this.ln1.call(x)), this.heads)));
    return F.add(h, this.out.call(F.gelu(this.fc.call(this.ln2.call(h)))));
  }
}

export class Gpt extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: Sequential;
  readonly lnf: LayerNorm;
  readonly head: Linear;
  constructor(s: Required<TransformerSpec>) {
    super();
    this.tok = new Embedding(s.vocab, s.width);
    this.pos = new Embedding(s.context, s.width);
    this.blocks = new Sequential(...Array.from({ length: s.layers }, () => new Block(s.width, s.heads)));
    this.lnf = new LayerNorm(s.width);
    this.head = new Linear(s.width, s.vocab);
  }
  forward(ids: Tensor): Tensor {
    // Every example fills the context, so position t's embedding is row t of pos.weight: add it to every example.
    const x = F.addBroadcast(this.tok.call(ids), this.pos.weight);
    return this.head.call(this.lnf.call(this.blocks.call(x)));
  }
}

export class Transformer extends GraphModel {
  declare readonly spec: Required<TransformerSpec>;
  constructor(gpu: Gpu, spec: Partial<TransformerSpec> = {}) {
    const s = transformerSpec(spec);
    const { kind: _kind, ...options } = s;
    super(gpu, { identity: { name: 'transformer', options }, module: new Gpt(s), inputShape: [s.context], inputDType: 'u32', classes: s.vocab, seed: s.seed, loss: crossEntropyIgnore });
  }
}
