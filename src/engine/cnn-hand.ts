/**
 * The CNN for 28×28 digits:
 *
 *   x [B,1,28,28] → conv 5×5 (c1, 'same') → ReLU → max-pool 2×2 → [B,c1,14,14]
 *                 → conv 5×5 (c2, 'same') → ReLU → max-pool 2×2 → [B,c2,7,7]
 *                 → (dense c2·49 → hidden → ReLU, when hidden > 0) → dense → logits [B,classes]
 *
 * Activations are NCHW, so the pooled [B,c2,7,7] tensor already is the
 * row-major [B, c2·49] matrix the dense layer multiplies: flattening costs
 * nothing. Each ReLU is fused into the max-pool that follows it (ReLU and max
 * commute), which saves a pass over the largest activations forward and
 * backward. Parameters and gradients live in FlatModel's flat buffers in the
 * order conv1.weight, conv1.bias, conv2.weight, conv2.bias, then the dense
 * layers named as in the MLP: dense0.weight [in, out], dense0.bias, and
 * dense1.* when there is a hidden layer.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from '../gpu/gpu.ts';
import { planActivationBackward } from '../gpu/kernels/activation.ts';
import { planBiasGrad } from '../gpu/kernels/bias.ts';
import { type ConvShape, planConv2dBackwardInput, planConv2dBackwardWeight, planConv2dForward } from '../gpu/kernels/conv2d.ts';
import { planMatmul } from '../gpu/kernels/matmul.ts';
import { type PoolShape, planMaxPoolBackward, planMaxPoolForward } from '../gpu/kernels/maxpool.ts';
import { type BatchIO, FlatModel, type LayerPlan, type ParamDecl } from './flat-model.ts';
import type { CnnSpec } from './model.ts';

export const CNN_IMAGE = 28;
export const CNN_KERNEL = 5;

/** The defaults: the smallest CNN we measured to stay above 97% on the 2,000 test digits from epoch 3 to 5 (AdamW, lr 2e-3, batch 32; docs/CNN.md). */
export const CNN_DEFAULTS: Required<CnnSpec> = { kind: 'cnn', seed: 1, channels: [8, 16], hidden: 0, classes: 10 };

/** Every shape in the network for batch `batch`, derived from the spec in one place. */
export function cnnShapes(spec: Required<CnnSpec>, batch: number) {
  const [c1, c2] = spec.channels;
  const pad = (CNN_KERNEL - 1) / 2;
  const conv1: ConvShape = { n: batch, cin: 1, h: CNN_IMAGE, w: CNN_IMAGE, cout: c1, kh: CNN_KERNEL, kw: CNN_KERNEL, pad };
  const pool1: PoolShape = { n: batch, c: c1, h: CNN_IMAGE, w: CNN_IMAGE };
  const half = CNN_IMAGE / 2;
  const conv2: ConvShape = { n: batch, cin: c1, h: half, w: half, cout: c2, kh: CNN_KERNEL, kw: CNN_KERNEL, pad };
  const pool2: PoolShape = { n: batch, c: c2, h: half, w: half };
  const quarter = half / 2;
  return { conv1, pool1, conv2, pool2, flat: c2 * quarter * quarter };
}

export function cnnSpec(spec: Partial<CnnSpec> = {}): Required<CnnSpec> {
  const full: Required<CnnSpec> = {
    kind: 'cnn',
    seed: spec.seed ?? CNN_DEFAULTS.seed,
    channels: spec.channels ?? CNN_DEFAULTS.channels,
    hidden: spec.hidden ?? CNN_DEFAULTS.hidden,
    classes: spec.classes ?? CNN_DEFAULTS.classes,
  };
  const [c1, c2] = full.channels ?? [];
  const positive = (v: unknown) => Number.isInteger(v) && (v as number) > 0;
  if (!Array.isArray(full.channels) || full.channels.length !== 2 || !positive(c1) || !positive(c2)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cnn: channels must be two positive integers [conv1, conv2], got ${JSON.stringify(full.channels)}`, { channels: full.channels });
  }
  if (!Number.isInteger(full.hidden) || full.hidden < 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cnn: hidden must be 0 (no hidden dense layer) or a positive integer, got ${full.hidden}`, { hidden: full.hidden });
  }
  if (!Number.isInteger(full.classes) || full.classes < 2) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cnn: classes must be an integer ≥ 2, got ${full.classes}`, { classes: full.classes });
  }
  return full;
}

/** Parameter declarations, in flat-buffer order. */
export function cnnParams(spec: Required<CnnSpec>): ParamDecl[] {
  const [c1, c2] = spec.channels;
  const k2 = CNN_KERNEL * CNN_KERNEL;
  const { flat } = cnnShapes(spec, 1);
  const decls: ParamDecl[] = [
    { name: 'conv1.weight', shape: [c1, 1, CNN_KERNEL, CNN_KERNEL], init: 'he', fanIn: k2, fanOut: c1 * k2 },
    { name: 'conv1.bias', shape: [c1], init: 'zeros', fanIn: k2, fanOut: c1 },
    { name: 'conv2.weight', shape: [c2, c1, CNN_KERNEL, CNN_KERNEL], init: 'he', fanIn: c1 * k2, fanOut: c2 * k2 },
    { name: 'conv2.bias', shape: [c2], init: 'zeros', fanIn: c1 * k2, fanOut: c2 },
  ];
  let width = flat;
  let layer = 0;
  if (spec.hidden > 0) {
    layer = 1;
    decls.push({ name: 'dense0.weight', shape: [flat, spec.hidden], init: 'he', fanIn: flat, fanOut: spec.hidden });
    decls.push({ name: 'dense0.bias', shape: [spec.hidden], init: 'zeros', fanIn: flat, fanOut: spec.hidden });
    width = spec.hidden;
  }
  decls.push({ name: `dense${layer}.weight`, shape: [width, spec.classes], init: 'glorot', fanIn: width, fanOut: spec.classes });
  decls.push({ name: `dense${layer}.bias`, shape: [spec.classes], init: 'zeros', fanIn: width, fanOut: spec.classes });
  return decls;
}

export class Cnn extends FlatModel {
  declare readonly spec: Required<CnnSpec>;

  constructor(gpu: Gpu, spec: Partial<CnnSpec> = {}) {
    const full = cnnSpec(spec);
    super(gpu, 'cnn', full, CNN_IMAGE * CNN_IMAGE, full.classes, cnnParams(full), full.seed);
  }

  protected planLayers(io: BatchIO): LayerPlan {
    const gpu = this.gpu;
    const b = io.batch;
    const s = cnnShapes(this.spec, b);
    const classes = this.spec.classes;
    const hidden = this.spec.hidden;
    const size = (c: ConvShape) => c.n * c.cout * c.h * c.w; // 'same' conv: output as large as the input
    // Forward activations. conv outputs are kept pre-ReLU; the pools apply it.
    const conv1Out = this.scratch(size(s.conv1), 'cnn-conv1');
    const pool1Out = this.scratch(size(s.conv1) / 4, 'cnn-pool1');
    const pool1Arg = this.scratch(size(s.conv1) / 4, 'cnn-pool1-argmax');
    const conv2Out = this.scratch(size(s.conv2), 'cnn-conv2');
    const pool2Out = this.scratch(b * s.flat, 'cnn-pool2');
    const pool2Arg = this.scratch(b * s.flat, 'cnn-pool2-argmax');
    const hiddenOut = hidden > 0 ? this.scratch(b * hidden, 'cnn-dense0') : null;
    // Backward: each gradient buffer is written whole before it is read.
    const dPool2 = this.scratch(b * s.flat, 'cnn-dpool2');
    const dConv2 = this.scratch(size(s.conv2), 'cnn-dconv2');
    const dPool1 = this.scratch(size(s.conv1) / 4, 'cnn-dpool1');
    const dConv1 = this.scratch(size(s.conv1), 'cnn-dconv1');
    const dHidden = hidden > 0 ? this.scratch(b * hidden, 'cnn-ddense0') : null;

    const forward: Dispatch[] = [
      planConv2dForward(gpu, s.conv1, io.x, this.param('conv1.weight'), this.param('conv1.bias'), conv1Out),
      planMaxPoolForward(gpu, s.pool1, conv1Out, pool1Out, pool1Arg, true),
      planConv2dForward(gpu, s.conv2, pool1Out, this.param('conv2.weight'), this.param('conv2.bias'), conv2Out),
      planMaxPoolForward(gpu, s.pool2, conv2Out, pool2Out, pool2Arg, true),
    ];
    const backward: Dispatch[] = [];
    const out = hidden > 0 ? 'dense1' : 'dense0';
    // The dense head: out = features · W + b, where features is pool2 (or the hidden layer).
    let features = pool2Out;
    let width = s.flat;
    if (hiddenOut && dHidden) {
      forward.push(planMatmul(gpu, pool2Out, this.param('dense0.weight'), hiddenOut, { m: b, n: hidden, k: s.flat, bias: this.param('dense0.bias'), relu: true }));
      features = hiddenOut;
      width = hidden;
    }
    forward.push(planMatmul(gpu, features, this.param(`${out}.weight`), io.logits, { m: b, n: classes, k: width, bias: this.param(`${out}.bias`) }));

    // dW = featuresᵀ · dLogits, db = column sums, dFeatures = dLogits · Wᵀ.
    backward.push(
      planMatmul(gpu, features, io.dLogits, this.grad(`${out}.weight`), { m: width, n: classes, k: b, transA: true }),
      planBiasGrad(gpu, io.dLogits, this.grad(`${out}.bias`), b, classes),
    );
    if (hiddenOut && dHidden) {
      backward.push(
        planMatmul(gpu, io.dLogits, this.param(`${out}.weight`), dHidden, { m: b, n: hidden, k: classes, transB: true }),
        // ReLU'(z) = [relu(z) > 0]: the post-ReLU output serves as the mask.
        planActivationBackward(gpu, 'relu', hiddenOut, dHidden, b * hidden),
        planMatmul(gpu, pool2Out, dHidden, this.grad('dense0.weight'), { m: s.flat, n: hidden, k: b, transA: true }),
        planBiasGrad(gpu, dHidden, this.grad('dense0.bias'), b, hidden),
        planMatmul(gpu, dHidden, this.param('dense0.weight'), dPool2, { m: b, n: s.flat, k: hidden, transB: true }),
      );
    } else {
      backward.push(planMatmul(gpu, io.dLogits, this.param(`${out}.weight`), dPool2, { m: b, n: s.flat, k: classes, transB: true }));
    }
    backward.push(
      // Pool backward with the fused ReLU's mask gives conv2's output gradient directly.
      planMaxPoolBackward(gpu, s.pool2, dPool2, pool2Arg, dConv2),
      planConv2dBackwardWeight(gpu, s.conv2, dConv2, pool1Out, this.grad('conv2.weight'), this.grad('conv2.bias')),
      planConv2dBackwardInput(gpu, s.conv2, dConv2, this.param('conv2.weight'), dPool1),
      planMaxPoolBackward(gpu, s.pool1, dPool1, pool1Arg, dConv1),
      // The input needs no gradient: conv1 stops at its weights.
      planConv2dBackwardWeight(gpu, s.conv1, dConv1, io.x, this.grad('conv1.weight'), this.grad('conv1.bias')),
    );
    return { forward, backward };
  }
}
