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
/** GELU with the tanh approximation: nn.GELU(approximate='tanh'). */
export class GELU extends Module {
  constructor(readonly approximate: 'tanh' = 'tanh') {
    super();
    if (approximate !== 'tanh') throw new RingtrainError(ErrorCode.InvalidArgument, `GELU: approximate must be 'tanh' (the exact erf form is its own op), got ${String(approximate)}`);
  }
  forward(x: Tensor): Tensor {
    return F.geluTanh(x);
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
