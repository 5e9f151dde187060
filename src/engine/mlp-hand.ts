/**
 * A multi-layer perceptron: inputSize → hidden… → classes, dense layers with
 * bias, a hidden activation (ReLU by default), softmax cross-entropy on top.
 *
 * Tensors, in flat-buffer order: `dense0.weight` [in, out], `dense0.bias`
 * [out], `dense1.weight`, … Weights are stored [in, out] so the forward pass
 * is x·W (+b), with He-normal init for ReLU layers and Glorot for the others;
 * biases start at zero.
 *
 * Forward for ReLU fuses bias and activation into the matmul epilogue; the
 * backward pass uses the transposed matmuls (xᵀ·dz for weights, dz·Wᵀ for
 * inputs) and a column sum for biases.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from '../gpu/gpu.ts';
import { checkActivation, planActivationBackward, planActivationForward } from '../gpu/kernels/activation.ts';
import { planBiasGrad } from '../gpu/kernels/bias.ts';
import { planMatmul } from '../gpu/kernels/matmul.ts';
import { FlatModel, type BatchIO, type LayerPlan, type ParamDecl } from './flat-model.ts';
import type { MlpSpec } from './model.ts';

export const MLP_DEFAULTS: Required<Omit<MlpSpec, 'kind'>> = { seed: 1, inputSize: 784, hidden: [128], classes: 10, activation: 'relu' };

function positive(name: string, v: unknown): void {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `mlp: ${name} must be a positive integer, got ${String(v)}`, { [name]: v });
  }
}

export function resolveMlpSpec(spec: MlpSpec): Required<MlpSpec> {
  const s = { ...MLP_DEFAULTS, ...spec, kind: 'mlp' as const };
  positive('inputSize', s.inputSize);
  positive('classes', s.classes);
  if (!Array.isArray(s.hidden)) throw new RingtrainError(ErrorCode.InvalidArgument, 'mlp: hidden must be an array of layer widths, e.g. [128]');
  s.hidden.forEach((h, i) => positive(`hidden[${i}]`, h));
  checkActivation(s.activation);
  if (!Number.isInteger(s.seed)) throw new RingtrainError(ErrorCode.InvalidArgument, `mlp: seed must be an integer, got ${s.seed}`);
  return { ...s, hidden: [...s.hidden] };
}

export class Mlp extends FlatModel {
  /** Layer widths including input and output: [in, h1, …, classes]. */
  readonly widths: number[];
  private readonly activation: Required<MlpSpec>['activation'];

  constructor(gpu: Gpu, spec: MlpSpec) {
    const s = resolveMlpSpec(spec);
    const widths = [s.inputSize, ...s.hidden, s.classes];
    const decls: ParamDecl[] = [];
    for (let i = 0; i + 1 < widths.length; i++) {
      const [fanIn, fanOut] = [widths[i], widths[i + 1]];
      const hiddenLayer = i + 2 < widths.length;
      decls.push({ name: `dense${i}.weight`, shape: [fanIn, fanOut], init: hiddenLayer && s.activation === 'relu' ? 'he' : 'glorot', fanIn, fanOut });
      decls.push({ name: `dense${i}.bias`, shape: [fanOut], init: 'zeros', fanIn, fanOut });
    }
    super(gpu, 'mlp', s, s.inputSize, s.classes, decls, s.seed);
    this.widths = widths;
    this.activation = s.activation;
  }

  protected planLayers(io: BatchIO): LayerPlan {
    const gpu = this.gpu;
    const B = io.batch;
    const L = this.widths.length - 1;
    const relu = this.activation === 'relu';
    // pre[i]: layer i's pre-activation (non-ReLU only); act[i]: its output (act[L-1] = logits).
    // For ReLU the output is enough for backward (out > 0 ⇔ pre > 0).
    const act: GPUBuffer[] = [];
    const pre: GPUBuffer[] = [];
    const dAct: GPUBuffer[] = [];
    for (let i = 0; i < L; i++) {
      const w = this.widths[i + 1];
      const last = i === L - 1;
      act.push(last ? io.logits : this.scratch(B * w, `act${i}`));
      pre.push(last || relu ? act[i] : this.scratch(B * w, `pre${i}`));
      dAct.push(last ? io.dLogits : this.scratch(B * w, `dact${i}`));
    }
    const input = (i: number): GPUBuffer => (i === 0 ? io.x : act[i - 1]);

    const forward: Dispatch[] = [];
    for (let i = 0; i < L; i++) {
      const [k, n] = [this.widths[i], this.widths[i + 1]];
      const hidden = i < L - 1;
      forward.push(planMatmul(gpu, input(i), this.param(`dense${i}.weight`), pre[i], { m: B, n, k, bias: this.param(`dense${i}.bias`), relu: hidden && relu }));
      if (hidden && !relu) forward.push(planActivationForward(gpu, this.activation, pre[i], act[i], B * n));
    }

    const backward: Dispatch[] = [];
    for (let i = L - 1; i >= 0; i--) {
      const [k, n] = [this.widths[i], this.widths[i + 1]];
      // dAct[i] holds ∂loss/∂pre[i] here (the activation's backward ran in place below).
      backward.push(planMatmul(gpu, input(i), dAct[i], this.grad(`dense${i}.weight`), { m: k, n, k: B, transA: true }));
      backward.push(planBiasGrad(gpu, dAct[i], this.grad(`dense${i}.bias`), B, n));
      if (i > 0) {
        backward.push(planMatmul(gpu, dAct[i], this.param(`dense${i}.weight`), dAct[i - 1], { m: B, n: k, k: n, transB: true }));
        backward.push(planActivationBackward(gpu, this.activation, pre[i - 1], dAct[i - 1], B * k));
      }
    }
    return { forward, backward };
  }
}
