/**
 * The built-in MLP: inputSize → hidden… → classes, Linear layers with bias,
 * a hidden activation (ReLU by default), softmax cross-entropy on top. Built
 * from the model API (src/nn), so the layout is the module's state dict:
 * `dense0.weight` [out, in] (PyTorch's Linear layout), `dense0.bias` [out],
 * `dense1.…`. Hidden ReLU layers start He-normal, the others Glorot-uniform,
 * biases zero (the ReLU after a Linear runs in the matmul's epilogue).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { GELU, Linear, ReLU, Tanh } from '../nn/ops/index.ts';
import { Module } from '../nn/module.ts';
import type { Tensor } from '../nn/tensor.ts';
import { GraphModel, type ModelMaking } from './graph-model.ts';
import { MLP_ACTIVATIONS, type MlpSpec } from './model.ts';

export const MLP_DEFAULTS: Required<Omit<MlpSpec, 'kind'>> = {
  seed: 1,
  inputSize: 784,
  hidden: [128],
  classes: 10,
  activation: 'relu',
};

function positive(name: string, v: unknown): void {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `mlp: ${name} must be a positive integer, got ${String(v)}`, {
      [name]: v,
    });
  }
}

export function resolveMlpSpec(spec: MlpSpec): Required<MlpSpec> {
  const s = { ...MLP_DEFAULTS, ...spec, kind: 'mlp' as const };
  positive('inputSize', s.inputSize);
  positive('classes', s.classes);
  if (!Array.isArray(s.hidden))
    throw new RingtrainError(ErrorCode.InvalidArgument, 'mlp: hidden must be an array of layer widths, e.g. [128]');
  s.hidden.forEach((h, i) => positive(`hidden[${i}]`, h));
  if (!(MLP_ACTIVATIONS as readonly string[]).includes(s.activation)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `mlp: unknown activation "${String(s.activation)}"; use one of relu, tanh, geluTanh (GELU's tanh form)`,
      { activation: s.activation },
    );
  }
  if (!Number.isInteger(s.seed))
    throw new RingtrainError(ErrorCode.InvalidArgument, `mlp: seed must be an integer, got ${s.seed}`);
  return { ...s, hidden: [...s.hidden] };
}

/** The MLP as a module: `dense0`, activation, `dense1`, …; the activation modules hold no parameters. */
export class MlpModule extends Module {
  readonly dense: Linear[] = [];
  private readonly act: Module;
  constructor(widths: number[], activation: Required<MlpSpec>['activation']) {
    super();
    // 'gelu' is the old name of 'geluTanh' (see MLP_ACTIVATIONS): both build the tanh form.
    this.act = activation === 'relu' ? new ReLU() : activation === 'tanh' ? new Tanh() : new GELU('tanh');
    for (let i = 0; i + 1 < widths.length; i++) {
      const hidden = i + 2 < widths.length;
      this.dense.push(
        new Linear(widths[i], widths[i + 1], { init: hidden && activation === 'relu' ? 'he' : 'glorot' }),
      );
    }
  }
  protected override members(): [string, Module][] {
    return this.dense.map((d, i) => [`dense${i}`, d]);
  }
  forward(x: Tensor): Tensor {
    return this.dense.reduce((h, layer, i) => (i === 0 ? layer.call(h) : layer.call(this.act.call(h))), x);
  }
}

export class Mlp extends GraphModel {
  declare readonly spec: Required<MlpSpec>;
  /** Layer widths including input and output: [in, h1, …, classes]. */
  readonly widths: number[];

  constructor(gpu: Gpu, spec: MlpSpec, made: ModelMaking = {}) {
    const s = resolveMlpSpec(spec);
    const widths = [s.inputSize, ...s.hidden, s.classes];
    const { kind: _kind, ...options } = s;
    super(gpu, {
      identity: { name: 'mlp', options },
      module: new MlpModule(widths, s.activation),
      inputShape: [s.inputSize],
      classes: s.classes,
      seed: s.seed,
      ...made,
    });
    this.widths = widths;
  }
}
