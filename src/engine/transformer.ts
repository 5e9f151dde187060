/**
 * The built-in transformer, on the model API, in two architectures
 * (`spec.arch`); both are PyTorch modules layer for layer, so the layout IS
 * their state dict (tok.weight, pos.weight, blocks.N.{ln1,qkv,proj,ln2,fc,out},
 * lnf, and head for the classic one; Linear weights [out, in]):
 *
 *   h = tok[idx] + pos[:T]                  [B, T, D]  (pos: `positions` ≥ T rows)
 *   h += proj(attention(qkv(ln1(h))))       causal, H heads (one fused op)
 *   h += out(gelu(fc(ln2(h))))
 *   logits = head(lnf(h))                   classic: a Linear with bias
 *   logits = lnf(h) · tok.weightᵀ           gpt2: tied to the embedding, no bias
 *
 * 'classic' is the words workload's model (checked against PyTorch): exact
 * (erf) GELU and PyTorch's default initialisation (embeddings N(0, 1),
 * LayerNorm 1 and 0, Linear U(±1/√in)). 'gpt2' is GPT-2's: the tanh form of
 * GELU and GPT-2's initialisation (every weight N(0, 0.02²), the residual
 * projections proj and out N(0, (0.02/√(2·layers))²), biases 0, LayerNorm 1
 * and 0). A spec without `arch` is classic: the checkpoints saved before
 * there was a choice are classic ones.
 *
 * Inputs are token ids (u32 on the GPU; f32 rows in the Model contract),
 * targets one per position with -1 ignored (padding after a word's end).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Linear } from '../nn/ops/index.ts';
import { streamed } from '../nn/init.ts';
import { Module } from '../nn/module.ts';
import { F } from '../nn/functional.ts';
import {
  addBroadcastOp,
  attentionOp,
  embeddingOp,
  geluOp,
  geluTanhOp,
  layerNormOp,
  linear,
  linearCrossEntropy,
  reshape,
  slice,
} from '../nn/ops/index.ts';
import { fusedHeadPays } from '../nn/ops/linear-cross-entropy/kernel.ts';
import { apply, Parameter, type Tensor } from '../nn/tensor.ts';
import { checkTargets, planCrossEntropy } from '../nn/ops/cross-entropy/kernel.ts';
import { crossEntropyRef } from '../nn/ops/cross-entropy/reference.ts';
import type { Loss } from '../nn/loss.ts';
import { GraphModel, type ModelMaking } from './graph-model.ts';
import { TRANSFORMER_ARCHS, type TransformerArch, type TransformerSpec } from './model.ts';

export type { TransformerArch, TransformerSpec };

/** The words workload's model: 105,627 parameters. */
export const TRANSFORMER_DEFAULTS: Required<Omit<TransformerSpec, 'positions'>> = {
  kind: 'transformer',
  seed: 1,
  vocab: 27,
  context: 32,
  layers: 2,
  width: 64,
  heads: 4,
  arch: 'classic',
};

/** GPT-2's initialisation: every weight N(0, 0.02²) (the residual projections scaled down by √(2·layers)). */
export const GPT2_INIT_STD = 0.02;

export function resolveTransformerSpec(spec: Partial<TransformerSpec> = {}): Required<TransformerSpec> {
  const sized = { ...TRANSFORMER_DEFAULTS, ...spec, kind: 'transformer' as const };
  const s: Required<TransformerSpec> = { ...sized, positions: sized.positions ?? sized.context };
  for (const key of ['vocab', 'context', 'positions', 'layers', 'width', 'heads'] as const) {
    if (!Number.isInteger(s[key]) || s[key] < 1)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `transformer: ${key} must be a positive integer, got ${s[key]}`,
        { [key]: s[key] },
      );
  }
  if (!TRANSFORMER_ARCHS.includes(s.arch))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `transformer: arch must be one of ${TRANSFORMER_ARCHS.join(', ')}, got ${JSON.stringify(s.arch)}`,
      { arch: s.arch },
    );
  if (s.context > s.positions) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `transformer: context ${s.context} is longer than its ${s.positions} positions (rows of pos.weight); give a context of at most ${s.positions}, or more positions`,
      { context: s.context, positions: s.positions },
    );
  }
  if (s.width % s.heads !== 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `transformer: width ${s.width} must be a multiple of heads ${s.heads}`,
      { width: s.width, heads: s.heads },
    );
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
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `expected ${rows} targets (one per position), got ${targets.length}`,
        { expected: rows, got: targets.length },
      );
    }
    // −1 travels as the same 32 bits; the shader reads the buffer as i32.
    out.set(new Uint32Array(checkTargets(targets, rows, classes).buffer));
    return out;
  },
  plan(gpu, io) {
    const rowStats = io.scratch(3 * io.rows, 'row-stats');
    return planCrossEntropy(
      gpu,
      { logits: io.output, targets: io.targets, dlogits: io.dOutput, rowStats, result: io.results },
      io.rows,
      io.classes,
      { scratch: io.scratch },
    );
  },
  cpu(output, targets, rows, classes) {
    const r = crossEntropyRef(output, Array.from(targets), rows, classes);
    return { loss: r.loss, dOutput: r.dlogits };
  },
};

const normal = (out: Float32Array, rand: { normal: () => number }, std: number) => {
  for (let i = 0; i < out.length; i++) out[i] = rand.normal() * std;
};

/** nn.Embedding: weight [count, dim], N(0, std²) (PyTorch's default: std 1). */
class Embedding extends Module {
  readonly weight: Parameter;
  constructor(count: number, dim: number, std = 1) {
    super();
    this.weight = new Parameter(
      [count, dim],
      streamed((out, rand) => normal(out, rand, std)),
    );
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

/** How a block's Linear layers draw their weights: PyTorch's default, or N(0, std²) with the residual projections' own std. */
type LinearInit = { init?: { std: number } };

class Block extends Module {
  readonly ln1: LayerNorm;
  readonly qkv: Linear;
  readonly proj: Linear;
  readonly ln2: LayerNorm;
  readonly fc: Linear;
  readonly out: Linear;
  private readonly gelu: typeof geluOp;
  constructor(
    width: number,
    private readonly heads: number,
    arch: TransformerArch,
    layers: number,
  ) {
    super();
    const weights: LinearInit = arch === 'gpt2' ? { init: { std: GPT2_INIT_STD } } : {};
    const residual: LinearInit = arch === 'gpt2' ? { init: { std: GPT2_INIT_STD / Math.sqrt(2 * layers) } } : {};
    this.ln1 = new LayerNorm(width);
    this.qkv = new Linear(width, 3 * width, weights);
    this.proj = new Linear(width, width, residual);
    this.ln2 = new LayerNorm(width);
    this.fc = new Linear(width, 4 * width, weights);
    this.out = new Linear(4 * width, width, residual);
    this.gelu = arch === 'gpt2' ? geluTanhOp : geluOp;
  }
  forward(x: Tensor): Tensor {
    const y = apply(attentionOp, [this.qkv.call(this.ln1.call(x))], { heads: this.heads, causal: true });
    const h = F.add(x, this.proj.call(y));
    return F.add(h, this.out.call(apply(this.gelu, [this.fc.call(this.ln2.call(h))], {})));
  }
}

export class TransformerModule extends Module {
  readonly tok: Embedding;
  readonly pos: Embedding;
  readonly blocks: Block[];
  readonly lnf: LayerNorm;
  /** The training window: how many of pos.weight's rows the forward reads. */
  private readonly context: number;
  /** The classic model's output layer; GPT-2 has none (its logits use tok.weight). */
  readonly head: Linear | null;
  constructor(s: Required<TransformerSpec>) {
    super();
    const std = s.arch === 'gpt2' ? GPT2_INIT_STD : 1;
    this.tok = new Embedding(s.vocab, s.width, std);
    this.pos = new Embedding(s.positions, s.width, std);
    this.context = s.context;
    this.blocks = Array.from({ length: s.layers }, () => new Block(s.width, s.heads, s.arch, s.layers));
    this.lnf = new LayerNorm(s.width);
    this.head = s.arch === 'gpt2' ? null : new Linear(s.width, s.vocab);
  }
  /** lnf(h) [B, T, D]: what the head reads. */
  private hidden(ids: Tensor): Tensor {
    // [B, T, D] + [T, D]: every sequence gets the same position embeddings, the table's first T rows
    // (wpe.weight[:T]). slice's backward zeros the whole gradient first: the rows past T get 0, as in PyTorch.
    const table = this.pos.weight;
    const pos = table.shape[0] === this.context ? table : slice(ids.graph.param(table), 0, 0, this.context);
    let h = apply(addBroadcastOp, [this.tok.call(ids), pos], {});
    for (const block of this.blocks) h = block.call(h);
    return this.lnf.call(h);
  }
  forward(ids: Tensor): Tensor {
    const out = this.hidden(ids);
    // Tied: tok.weight is [vocab, D], a Linear's [out, in], so the logits are out · tok.weightᵀ.
    return this.head ? this.head.call(out) : linear(out, this.tok.weight);
  }
  /**
   * The mean loss over targets [B·T] (−1 ignored) with the head fused into it (linearCrossEntropy):
   * what `forward` and the loss compute, without the logits [B·T, vocab] ever being whole.
   */
  forwardLoss(ids: Tensor, targets: Tensor): Tensor {
    const out = this.hidden(ids);
    const rows = reshape(out, [targets.size, out.shape[out.shape.length - 1]]);
    if (!this.head) return linearCrossEntropy(rows, this.tok.weight, targets);
    return linearCrossEntropy(rows, this.head.weight, targets, this.head.bias ?? undefined);
  }
}

export class Transformer extends GraphModel {
  /** vocab, context, positions, layers, width, heads, arch: what the CPU reference needs besides the weights. */
  readonly shape: {
    vocab: number;
    context: number;
    positions: number;
    layers: number;
    width: number;
    heads: number;
    arch: TransformerArch;
  };
  constructor(gpu: Gpu, spec: Partial<TransformerSpec> = {}, made: ModelMaking = {}) {
    const s = resolveTransformerSpec(spec);
    const { kind: _kind, seed, arch, positions, ...sizes } = s;
    const module = new TransformerModule(s);
    // A classic model records no arch, and a table of `context` rows no positions, as every checkpoint before them did:
    // their specs stay equal.
    const options = {
      ...sizes,
      ...(positions === s.context ? {} : { positions }),
      ...(arch === 'classic' ? {} : { arch }),
    };
    super(gpu, {
      identity: { name: 'transformer', options: { seed, ...options } },
      module,
      inputShape: [s.context],
      inputDType: 'u32',
      classes: s.vocab,
      seed,
      loss: sequenceCrossEntropy,
      // Training fuses the head into the loss where the logits would pass one chunk (GPT-2's vocabulary at
      // 1,024 tokens a step): by shape alone, so every rank computes alike.
      fusedLoss: (ids, targets) => (fusedHeadPays(targets.size, s.vocab) ? module.forwardLoss(ids, targets) : null),
      ...made,
    });
    this.shape = {
      vocab: s.vocab,
      context: s.context,
      positions: s.positions,
      layers: s.layers,
      width: s.width,
      heads: s.heads,
      arch: s.arch,
    };
  }
}
