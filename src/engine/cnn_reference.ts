/**
 * The CNN of cnn.ts on the CPU, forward and backward (sums accumulated in
 * float64, tensors stored as float32), over the same flat parameter layout. It is the oracle for the GPU model
 * (tests compare losses and whole gradient buffers) and is itself checked
 * against finite differences, so the chain of layer gradients is verified
 * twice: CPU math against numerics, GPU against CPU.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { conv2dBackwardInputCpu, conv2dBackwardWeightCpu, conv2dForwardCpu } from '../gpu/kernels/conv2d_reference.ts';
import { maxPoolBackwardCpu, maxPoolForwardCpu } from '../gpu/kernels/maxpool_reference.ts';
import { cnnParams, cnnShapes } from './cnn-hand.ts';
import { buildLayout } from './flat-model.ts';
import type { CnnSpec, ParamEntry } from './model.ts';

export interface CnnCpuResult {
  /** Mean softmax cross-entropy over the batch. */
  loss: number;
  /** Gradient of the mean loss, in the flat layout (padding zero). */
  grads: Float32Array;
  logits: Float32Array;
}

function tensor(params: Float32Array, e: ParamEntry): Float32Array {
  return params.subarray(e.offset, e.offset + e.length);
}

/** logits[b, out] = features[b, in] · w[in, out] + bias[out] */
function dense(features: Float32Array, w: Float32Array, bias: Float32Array, batch: number, inputs: number, outputs: number): Float32Array {
  const y = new Float32Array(batch * outputs);
  for (let b = 0; b < batch; b++)
    for (let o = 0; o < outputs; o++) {
      let acc = bias[o];
      for (let i = 0; i < inputs; i++) acc += features[b * inputs + i] * w[i * outputs + o];
      y[b * outputs + o] = acc;
    }
  return y;
}

/** dW = featuresᵀ·dy, db = column sums of dy, dFeatures = dy·Wᵀ. */
function denseBackward(features: Float32Array, w: Float32Array, dy: Float32Array, batch: number, inputs: number, outputs: number) {
  const dW = new Float32Array(inputs * outputs);
  const dB = new Float32Array(outputs);
  const dX = new Float32Array(batch * inputs);
  for (let b = 0; b < batch; b++)
    for (let o = 0; o < outputs; o++) {
      const g = dy[b * outputs + o];
      dB[o] += g;
      for (let i = 0; i < inputs; i++) {
        dW[i * outputs + o] += features[b * inputs + i] * g;
        dX[b * inputs + i] += w[i * outputs + o] * g;
      }
    }
  return { dW, dB, dX };
}

export function cnnForwardBackwardCpu(spec: Required<CnnSpec>, params: Float32Array, x: Float32Array, labels: ArrayLike<number>): CnnCpuResult {
  const decls = cnnParams(spec);
  const { layout, flatLength } = buildLayout(decls);
  if (params.length !== flatLength) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cnn reference: params has ${params.length} floats, the layout needs ${flatLength}`);
  }
  const batch = labels.length;
  const s = cnnShapes(spec, batch);
  if (x.length !== batch * s.conv1.h * s.conv1.w) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `cnn reference: x has ${x.length} floats for ${batch} labels`);
  }
  const p = (name: string) => tensor(params, layout.find((e) => e.name === name)!);
  const classes = spec.classes;
  const hidden = spec.hidden;
  const out = hidden > 0 ? 'dense1' : 'dense0';

  // Forward (ReLU fused into the pools, as on the GPU).
  const c1 = conv2dForwardCpu(s.conv1, x, p('conv1.weight'), p('conv1.bias'));
  const p1 = maxPoolForwardCpu(s.pool1, c1, true);
  const c2 = conv2dForwardCpu(s.conv2, p1.y, p('conv2.weight'), p('conv2.bias'));
  const p2 = maxPoolForwardCpu(s.pool2, c2, true);
  let features = p2.y;
  let width = s.flat;
  if (hidden > 0) {
    features = dense(p2.y, p('dense0.weight'), p('dense0.bias'), batch, s.flat, hidden).map((v) => Math.max(v, 0));
    width = hidden;
  }
  const logits = dense(features, p(`${out}.weight`), p(`${out}.bias`), batch, width, classes);

  // Softmax cross-entropy, mean over the batch; dLogits = (softmax - onehot) / batch.
  let loss = 0;
  const dLogits = new Float32Array(batch * classes);
  for (let b = 0; b < batch; b++) {
    const row = logits.subarray(b * classes, (b + 1) * classes);
    const max = Math.max(...row);
    let sum = 0;
    for (const v of row) sum += Math.exp(v - max);
    const logSum = Math.log(sum) + max;
    loss += logSum - row[labels[b]];
    for (let c = 0; c < classes; c++) dLogits[b * classes + c] = (Math.exp(row[c] - logSum) - (c === labels[b] ? 1 : 0)) / batch;
  }
  loss /= batch;

  // Backward, writing each gradient into its slot of the flat buffer.
  const grads = new Float32Array(flatLength);
  const put = (name: string, values: Float32Array) => grads.set(values, layout.find((e) => e.name === name)!.offset);
  const head = denseBackward(features, p(`${out}.weight`), dLogits, batch, width, classes);
  put(`${out}.weight`, head.dW);
  put(`${out}.bias`, head.dB);
  let dPool2 = head.dX;
  if (hidden > 0) {
    const dHidden = head.dX.map((g, i) => (features[i] > 0 ? g : 0));
    const h = denseBackward(p2.y, p('dense0.weight'), dHidden, batch, s.flat, hidden);
    put('dense0.weight', h.dW);
    put('dense0.bias', h.dB);
    dPool2 = h.dX;
  }
  const dC2 = maxPoolBackwardCpu(s.pool2, dPool2, p2.argmax);
  const g2 = conv2dBackwardWeightCpu(s.conv2, dC2, p1.y);
  put('conv2.weight', g2.dWeight);
  put('conv2.bias', g2.dBias);
  const dP1 = conv2dBackwardInputCpu(s.conv2, dC2, p('conv2.weight'));
  const dC1 = maxPoolBackwardCpu(s.pool1, dP1, p1.argmax);
  const g1 = conv2dBackwardWeightCpu(s.conv1, dC1, x);
  put('conv1.weight', g1.dWeight);
  put('conv1.bias', g1.dBias);
  return { loss, grads, logits };
}

/** The loss alone, for finite differences. */
export function cnnLossCpu(spec: Required<CnnSpec>, params: Float32Array, x: Float32Array, labels: ArrayLike<number>): number {
  return cnnForwardBackwardCpu(spec, params, x, labels).loss;
}
