/**
 * Layers: modules named and shaped as their torch.nn namesakes, so that a
 * state dict moves between the two (Linear.weight is [out, in]; Conv2d.weight
 * is [out, in, kh, kw]).
 *
 * Initialisation: `'torch'` draws as PyTorch's defaults do (uniform in
 * ±1/√fan_in for weights and biases); `'he'` (normal, std √(2/fan_in), for
 * ReLU layers) and `'glorot'` (uniform in ±√(6/(fan_in+fan_out))) with zero
 * biases are the schemes of the built-in MLP and CNN. He and Glorot draw a
 * Linear weight in [in, out] order and store it transposed, so the built-in
 * models keep the initial weights they had when weights were stored [in, out].
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import * as F from './functional.ts';
import { Module } from './module.ts';
import { Parameter, type ParamInit, type Tensor } from './tensor.ts';

export type InitScheme = 'torch' | 'he' | 'glorot';

const zeros: ParamInit = (out) => out.fill(0);

function uniformInit(limit: number): ParamInit {
  return (out, rand) => {
    for (let i = 0; i < out.length; i++) out[i] = (2 * rand.uniform() - 1) * limit;
  };
}

/** Fills [rows, cols] storage with values drawn in [cols, rows] order (transposed). */
function transposed(draw: ParamInit, rows: number, cols: number): ParamInit {
  return (out, rand) => {
    const t = new Float32Array(out.length);
    draw(t, rand);
    for (let c = 0; c < cols; c++) for (let r = 0; r < rows; r++) out[r * cols + c] = t[c * rows + r];
  };
}

function weightInit(scheme: InitScheme, fanIn: number, fanOut: number): ParamInit {
  if (scheme === 'torch') return uniformInit(1 / Math.sqrt(fanIn));
  if (scheme === 'glorot') return uniformInit(Math.sqrt(6 / (fanIn + fanOut)));
  const std = Math.sqrt(2 / fanIn);
  return (out, rand) => {
    for (let i = 0; i < out.length; i++) out[i] = rand.normal() * std;
  };
}

function positive(layer: string, values: Record<string, number>): void {
  for (const [k, v] of Object.entries(values)) {
    if (!Number.isInteger(v) || v < 1) throw new RingtrainError(ErrorCode.InvalidArgument, `${layer}: ${k} must be a positive integer, got ${v}`, { [k]: v });
  }
}

export class Linear extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  constructor(readonly inFeatures: number, readonly outFeatures: number, options: { bias?: boolean; init?: InitScheme } = {}) {
    super();
    positive('Linear', { inFeatures, outFeatures });
    const scheme = options.init ?? 'torch';
    const w = weightInit(scheme, inFeatures, outFeatures);
    this.weight = new Parameter([outFeatures, inFeatures], scheme === 'torch' ? w : transposed(w, outFeatures, inFeatures));
    this.bias = options.bias === false ? null : new Parameter([outFeatures], scheme === 'torch' ? uniformInit(1 / Math.sqrt(inFeatures)) : zeros);
  }
  forward(x: Tensor): Tensor {
    return F.linear(x, this.weight, this.bias ?? undefined);
  }
}

export class Conv2d extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(inChannels: number, outChannels: number, kernelSize: number, options: { padding?: number | 'same'; init?: InitScheme } = {}) {
    super();
    positive('Conv2d', { inChannels, outChannels, kernelSize });
    const k2 = kernelSize * kernelSize;
    const scheme = options.init ?? 'torch';
    this.padding = options.padding === 'same' ? (kernelSize - 1) / 2 : (options.padding ?? 0);
    if (!Number.isInteger(this.padding)) throw new RingtrainError(ErrorCode.InvalidArgument, `Conv2d: padding 'same' needs an odd kernel size, got ${kernelSize}`, { kernelSize });
    this.weight = new Parameter([outChannels, inChannels, kernelSize, kernelSize], weightInit(scheme, inChannels * k2, outChannels * k2));
    this.bias = new Parameter([outChannels], scheme === 'torch' ? uniformInit(1 / Math.sqrt(inChannels * k2)) : zeros);
  }
  readonly padding: number;
  forward(x: Tensor): Tensor {
    return F.conv2d(x, this.weight, this.bias, this.padding);
  }
}

export class ReLU extends Module {
  forward(x: Tensor): Tensor {
    return F.relu(x);
  }
}
export class Tanh extends Module {
  forward(x: Tensor): Tensor {
    return F.tanh(x);
  }
}
/** nn.GELU: the exact erf form by default, or approximate 'tanh' (GPT-2's). */
export class GELU extends Module {
  constructor(readonly approximate: 'none' | 'tanh' = 'none') {
    super();
    if (approximate !== 'none' && approximate !== 'tanh') throw new RingtrainError(ErrorCode.InvalidArgument, `GELU: approximate must be 'none' or 'tanh', got ${String(approximate)}`);
  }
  forward(x: Tensor): Tensor {
    return this.approximate === 'tanh' ? F.geluTanh(x) : F.gelu(x);
  }
}
/** 2×2 max-pooling with stride 2 (nn.MaxPool2d(2)). */
export class MaxPool2d extends Module {
  forward(x: Tensor): Tensor {
    return F.maxPool2d(x);
  }
}
export class Flatten extends Module {
  forward(x: Tensor): Tensor {
    return F.flatten(x);
  }
}

/** nn.LayerNorm(dim): weight ones, bias zeros. */
export class LayerNorm extends Module {
  readonly weight: Parameter;
  readonly bias: Parameter;
  constructor(dim: number, readonly eps = 1e-5) {
    super();
    positive('LayerNorm', { dim });
    this.weight = new Parameter([dim], (out) => out.fill(1));
    this.bias = new Parameter([dim], zeros);
  }
  forward(x: Tensor): Tensor {
    return F.layerNorm(x, this.weight, this.bias, this.eps);
  }
}

/** nn.Embedding(count, dim): weight [count, dim], standard-normal init as PyTorch's. Input: u32 ids. */
export class Embedding extends Module {
  readonly weight: Parameter;
  constructor(count: number, dim: number) {
    super();
    positive('Embedding', { count, dim });
    this.weight = new Parameter([count, dim], (out, rand) => {
      for (let i = 0; i < out.length; i++) out[i] = rand.normal();
    });
  }
  forward(ids: Tensor): Tensor {
    return F.embedding(ids, this.weight);
  }
}

/**
 * nn.Dropout(p) with a seeded mask in train mode; the identity in eval mode
 * (`eval()`, as GraphModel's predict and evaluate trace it). `training` is the
 * initial mode.
 */
export class Dropout extends Module {
  constructor(readonly p: number, readonly seed = 0, training = true) {
    super();
    this.training = training;
  }
  forward(x: Tensor): Tensor {
    return F.dropout(x, this.p, this.seed, this.training);
  }
}

/**
 * Causal multi-head self-attention as in GPT-2: `qkv` = Linear(D, 3D) (q | k |
 * v side by side), the fused attention op, then `proj` = Linear(D, D).
 * x [batch, T, D] → [batch, T, D].
 */
export class CausalSelfAttention extends Module {
  readonly qkv: Linear;
  readonly proj: Linear;
  constructor(width: number, readonly heads: number) {
    super();
    positive('CausalSelfAttention', { width, heads });
    if (width % heads !== 0) throw new RingtrainError(ErrorCode.InvalidArgument, `CausalSelfAttention: width ${width} must be a multiple of heads ${heads}`, { width, heads });
    this.qkv = new Linear(width, 3 * width);
    this.proj = new Linear(width, width);
  }
  forward(x: Tensor): Tensor {
    return this.proj.call(F.attention(this.qkv.call(x), this.heads));
  }
}
