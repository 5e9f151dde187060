/**
 * The MLP (dense layers, ReLU, softmax cross-entropy, SGD with momentum) in
 * TensorFlow.js ops, for side-by-side comparisons with ours. Forward uses
 * TF.js's fused matmul+bias+ReLU; backward is written with TF.js ops (the ESM
 * gradient registry of tfjs-core does not load under Deno, and these are the
 * ops its autodiff would run); the update is PyTorch-style momentum, like ours.
 */
// deno-lint-ignore no-explicit-any
export type Tf = any;

export async function loadTfWebgpu(): Promise<Tf | null> {
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/tfjs-backend-webgpu');
  if (!(await tf.setBackend('webgpu'))) return null;
  await tf.ready();
  return tf;
}

export interface TfMlp {
  /** One step on a batch; resolves to the batch's mean loss (read back, like ours). */
  step(x: Float32Array, labels: ArrayLike<number>): Promise<number>;
  /** Accuracy and mean loss over a dataset. */
  evaluate(x: Float32Array, labels: ArrayLike<number>): Promise<{ accuracy: number; loss: number }>;
  dispose(): void;
}

/**
 * `init[i]` = { w: [in×out] row-major, b: [out] } per layer; pass ours to
 * start both from the same weights.
 */
/** Our Linear weight [out, in] (PyTorch's layout) as the [in, out] matrix createTfMlp takes. */
export function inOut(w: Float32Array, out: number, inF: number): Float32Array {
  const t = new Float32Array(w.length);
  for (let o = 0; o < out; o++) for (let i = 0; i < inF; i++) t[i * out + o] = w[o * inF + i];
  return t;
}

export function createTfMlp(
  tf: Tf,
  widths: number[],
  init: { w: Float32Array; b: Float32Array }[],
  lr: number,
  momentum: number,
): TfMlp {
  const L = widths.length - 1;
  const W = init.map((p, i) => tf.variable(tf.tensor2d(p.w, [widths[i], widths[i + 1]])));
  const B = init.map((p, i) => tf.variable(tf.tensor1d(p.b)));
  const vW = W.map((w: Tf) => tf.variable(tf.zerosLike(w)));
  const vB = B.map((b: Tf) => tf.variable(tf.zerosLike(b)));
  const classes = widths[L];

  const forward = (x: Tf): Tf[] => {
    const acts = [x];
    for (let i = 0; i < L; i++)
      acts.push(tf.fused.matMul({ a: acts[i], b: W[i], bias: B[i], activation: i + 1 < L ? 'relu' : 'linear' }));
    return acts;
  };
  const oneHot = (labels: ArrayLike<number>) => tf.oneHot(tf.tensor1d(Array.from(labels), 'int32'), classes);

  return {
    async step(xData, labels) {
      const n = labels.length;
      const loss = tf.tidy(() => {
        const x = tf.tensor2d(xData, [n, widths[0]]);
        const y = oneHot(labels);
        const acts = forward(x);
        const logp = tf.logSoftmax(acts[L]);
        const lossValue = tf.neg(tf.mean(tf.sum(tf.mul(y, logp), 1)));
        let d = tf.div(tf.sub(tf.exp(logp), y), n);
        for (let i = L - 1; i >= 0; i--) {
          const gW = tf.matMul(acts[i], d, true, false);
          const gb = tf.sum(d, 0);
          if (i > 0) d = tf.mul(tf.matMul(d, W[i], false, true), tf.step(acts[i]));
          vW[i].assign(tf.add(tf.mul(vW[i], momentum), gW));
          vB[i].assign(tf.add(tf.mul(vB[i], momentum), gb));
          W[i].assign(tf.sub(W[i], tf.mul(vW[i], lr)));
          B[i].assign(tf.sub(B[i], tf.mul(vB[i], lr)));
        }
        return lossValue;
      });
      const [value] = await loss.data();
      loss.dispose();
      return value;
    },
    async evaluate(xData, labels) {
      const n = labels.length;
      const [right, lossSum] = tf.tidy(() => {
        const x = tf.tensor2d(xData, [n, widths[0]]);
        const y = oneHot(labels);
        const logits = forward(x)[L];
        const correct = tf.sum(
          tf.cast(tf.equal(tf.argMax(logits, 1), tf.tensor1d(Array.from(labels), 'int32')), 'float32'),
        );
        const loss = tf.neg(tf.sum(tf.mul(y, tf.logSoftmax(logits))));
        return [correct, loss];
      });
      const [c] = await right.data();
      const [l] = await lossSum.data();
      right.dispose();
      lossSum.dispose();
      return { accuracy: c / n, loss: l / n };
    },
    dispose() {
      for (const v of [...W, ...B, ...vW, ...vB]) v.dispose();
    },
  };
}
