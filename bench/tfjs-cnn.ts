/**
 * Our CNN (src/engine/cnn.ts: conv 5×5 'same' → ReLU → max-pool 2×2, twice,
 * then dense layers; softmax cross-entropy; SGD with momentum) in TensorFlow.js
 * ops, for side-by-side comparisons with ours.
 *
 * TF.js convolves NHWC activations with HWIO filters; ours are NCHW and OIHW.
 * `createTfCnn` takes OUR tensors and transposes the conv filters, and the
 * pooled [B,7,7,c2] map is transposed to NCHW before flattening so that the
 * dense weights ([out, in], as ours and PyTorch's) are used exactly as ours.
 *
 * The backward pass is written with TF.js kernels (tfjs-core's gradient
 * registry does not load under Deno, see tfjs-mlp.ts): the ones its autodiff
 * would run for these ops (Conv2DBackpropFilter, conv2dTranspose for the input
 * gradient, MaxPoolGrad), called through the engine because tfjs-core does not
 * export the first and last as ops.
 */
import type { Tf } from './tfjs-mlp.ts';

export interface TfCnnInit {
  /** Our tensors by name (conv1.weight [c1,1,5,5], ..., dense0.weight [out,in] as PyTorch's Linear, ...), as in the model's layout. */
  tensors: Record<string, Float32Array>;
  channels: [number, number];
  /** Width of the hidden dense layer, 0 for none. */
  hidden: number;
  classes: number;
}

export interface TfCnn {
  /** One step on a batch; resolves to the batch's mean loss (read back, like ours). */
  step(x: Float32Array, labels: ArrayLike<number>): Promise<number>;
  /** Accuracy and mean loss over a dataset, in chunks of 500. */
  evaluate(x: Float32Array, labels: ArrayLike<number>): Promise<{ accuracy: number; loss: number }>;
  /** The current weights in OUR layout (OIHW filters), by our names. */
  readTensors(): Promise<Record<string, Float32Array>>;
  dispose(): void;
}

const IMAGE = 28;
const KERNEL = 5;
/** OIHW (ours) ↔ HWIO (TF.js) */
const OIHW_TO_HWIO = [2, 3, 1, 0];
const HWIO_TO_OIHW = [3, 2, 0, 1];

export function createTfCnn(tf: Tf, init: TfCnnInit, lr: number, momentum: number): TfCnn {
  const [c1, c2] = init.channels;
  const flat = c2 * (IMAGE / 4) * (IMAGE / 4);
  const widths = init.hidden > 0 ? [flat, init.hidden, init.classes] : [flat, init.classes];
  const get = (name: string) => {
    const t = init.tensors[name];
    if (!t) throw new Error(`tfjs-cnn: no tensor "${name}" in the initial weights`);
    return t;
  };
  const filter = (name: string, cout: number, cin: number) =>
    tf.variable(tf.tidy(() => tf.transpose(tf.tensor4d(get(name), [cout, cin, KERNEL, KERNEL]), OIHW_TO_HWIO)));
  const convW = [filter('conv1.weight', c1, 1), filter('conv2.weight', c2, c1)];
  const convB = [tf.variable(tf.tensor1d(get('conv1.bias'))), tf.variable(tf.tensor1d(get('conv2.bias')))];
  const denseW = widths.slice(1).map((out, i) => tf.variable(tf.tensor2d(get(`dense${i}.weight`), [out, widths[i]])));
  const denseB = widths.slice(1).map((_, i) => tf.variable(tf.tensor1d(get(`dense${i}.bias`))));
  const params = [...convW, ...convB, ...denseW, ...denseB];
  const velocity = params.map((p) => tf.variable(tf.zerosLike(p)));
  const L = denseW.length;

  /** Every activation the backward pass needs. */
  const forward = (xData: Float32Array, n: number) => {
    const x = tf.tensor4d(xData, [n, IMAGE, IMAGE, 1]); // one channel: NCHW and NHWC are the same bytes
    const r1 = tf.relu(tf.add(tf.conv2d(x, convW[0], 1, 'same'), convB[0]));
    const p1 = tf.maxPool(r1, 2, 2, 'valid');
    const r2 = tf.relu(tf.add(tf.conv2d(p1, convW[1], 1, 'same'), convB[1]));
    const p2 = tf.maxPool(r2, 2, 2, 'valid');
    const acts = [tf.reshape(tf.transpose(p2, [0, 3, 1, 2]), [n, flat])]; // flatten in NCHW order, like ours
    for (let i = 0; i < L; i++) {
      const z = tf.add(tf.matMul(acts[i], denseW[i], false, true), denseB[i]);
      acts.push(i + 1 < L ? tf.relu(z) : z);
    }
    return { x, r1, p1, r2, p2, acts };
  };
  const labelTensor = (labels: ArrayLike<number>) => tf.tensor1d(Array.from(labels), 'int32');
  const poolGrad = (dy: Tf, input: Tf, output: Tf) =>
    tf.engine().runKernel('MaxPoolGrad', { dy, input, output }, { filterSize: 2, strides: 2, pad: 'valid' });
  const filterGrad = (x: Tf, dy: Tf, filterShape: number[]) =>
    tf
      .engine()
      .runKernel('Conv2DBackpropFilter', { x, dy }, { strides: 1, pad: 'same', dataFormat: 'NHWC', filterShape });

  return {
    async step(xData, labels) {
      const n = labels.length;
      const loss = tf.tidy(() => {
        const f = forward(xData, n);
        const y = tf.oneHot(labelTensor(labels), init.classes);
        const logp = tf.logSoftmax(f.acts[L]);
        const lossValue = tf.neg(tf.mean(tf.sum(tf.mul(y, logp), 1)));
        // Gradients in the order of `params`, from the mean loss.
        const dDenseW: Tf[] = [];
        const dDenseB: Tf[] = [];
        let d = tf.div(tf.sub(tf.exp(logp), y), n);
        for (let i = L - 1; i >= 0; i--) {
          dDenseW[i] = tf.matMul(d, f.acts[i], true, false);
          dDenseB[i] = tf.sum(d, 0);
          d = tf.matMul(d, denseW[i]);
          if (i > 0) d = tf.mul(d, tf.step(f.acts[i]));
        }
        const dP2 = tf.transpose(tf.reshape(d, [n, c2, IMAGE / 4, IMAGE / 4]), [0, 2, 3, 1]);
        // ReLU' from the post-ReLU output: relu(z) > 0 exactly where z > 0.
        const dZ2 = tf.mul(poolGrad(dP2, f.r2, f.p2), tf.step(f.r2));
        const dW2 = filterGrad(f.p1, dZ2, [KERNEL, KERNEL, c1, c2]);
        const dB2 = tf.sum(dZ2, [0, 1, 2]);
        const dP1 = tf.conv2dTranspose(dZ2, convW[1], [n, IMAGE / 2, IMAGE / 2, c1], 1, 'same');
        const dZ1 = tf.mul(poolGrad(dP1, f.r1, f.p1), tf.step(f.r1));
        const dW1 = filterGrad(f.x, dZ1, [KERNEL, KERNEL, 1, c1]);
        const dB1 = tf.sum(dZ1, [0, 1, 2]);
        const grads = [dW1, dW2, dB1, dB2, ...dDenseW, ...dDenseB];
        // PyTorch-style momentum, like ours: v = m·v + g; p -= lr·v.
        params.forEach((p, i) => {
          velocity[i].assign(tf.add(tf.mul(velocity[i], momentum), grads[i]));
          p.assign(tf.sub(p, tf.mul(velocity[i], lr)));
        });
        return lossValue;
      });
      const [value] = await loss.data();
      loss.dispose();
      return value;
    },
    async evaluate(xData, labels) {
      const total = labels.length;
      const pixels = IMAGE * IMAGE;
      let right = 0;
      let lossSum = 0;
      for (let start = 0; start < total; start += 500) {
        const n = Math.min(500, total - start);
        const chunkLabels = Array.from(labels).slice(start, start + n);
        const [c, l] = tf.tidy(() => {
          const logits = forward(xData.subarray(start * pixels, (start + n) * pixels), n).acts[L];
          const y = labelTensor(chunkLabels);
          const correct = tf.sum(tf.cast(tf.equal(tf.argMax(logits, 1), y), 'float32'));
          const loss = tf.neg(tf.sum(tf.mul(tf.oneHot(y, init.classes), tf.logSoftmax(logits))));
          return [correct, loss];
        });
        right += (await c.data())[0];
        lossSum += (await l.data())[0];
        c.dispose();
        l.dispose();
      }
      return { accuracy: right / total, loss: lossSum / total };
    },
    async readTensors() {
      const out: Record<string, Float32Array> = {};
      const read = async (t: Tf) => new Float32Array(await t.data());
      for (const [i, w] of convW.entries()) {
        const oihw = tf.transpose(w, HWIO_TO_OIHW);
        out[`conv${i + 1}.weight`] = await read(oihw);
        oihw.dispose();
        out[`conv${i + 1}.bias`] = await read(convB[i]);
      }
      for (let i = 0; i < L; i++) {
        out[`dense${i}.weight`] = await read(denseW[i]);
        out[`dense${i}.bias`] = await read(denseB[i]);
      }
      return out;
    },
    dispose() {
      for (const v of [...params, ...velocity]) v.dispose();
    },
  };
}
