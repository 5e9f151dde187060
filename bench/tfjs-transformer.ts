/**
 * The transformer of the words workload (docs/MODELS.md "transformer") in
 * TensorFlow.js ops, for side-by-side timing with ours on the same adapter.
 * The module is the PyTorch one of docs/MODELS.md op for op:
 *
 *   h = gather(tok.weight, ids) + pos.weight                  [B, T, D]
 *   h += proj(softmax(q·kᵀ/√dh + causal mask)·v)             per head
 *   h += out(gelu(fc(ln2(h))))                                 exact erf GELU
 *   logits = head(lnf(h))
 *
 * with LayerNorm ε = 1e-5 (biased variance), Linear weights kept [out, in]
 * (used as x·Wᵀ, so the tensors are ours by name, unchanged), and the loss
 * the mean cross-entropy over the counted targets (target −1 is padding).
 * Gradients come from TF.js's autodiff (tf.variableGrads: needs tfjs-core's
 * gradient registry, see tfjs-gradients.node.ts); the update is AdamW as in
 * shaders/adamw.wgsl, decoupled decay on every parameter, written with TF.js
 * ops because tf.train.adam has no weight decay.
 */
import type { Tf } from './tfjs-mlp.ts';

export interface TfTransformerShape {
  vocab: number;
  context: number;
  layers: number;
  width: number;
  heads: number;
}

/** The AdamW settings, as shaders/adamw.wgsl's uniform holds them (the step number is the bench's own). */
export interface AdamwHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

export interface TfTransformer {
  /** Real parameters (Σ of the variables' sizes). */
  readonly paramCount: number;
  /**
   * Records one training step on a batch (ids [B·T] as f32, targets [B·T],
   * −1 ignored) and returns the batch's mean loss as a scalar tensor that the
   * caller reads (or disposes) when it chooses: like our deferred step, the
   * step itself never waits for the GPU.
   */
  step(ids: Float32Array, targets: Int32Array): Tf;
  dispose(): void;
}

const LAYER_NORM_EPS = 1e-5;
/** Added to masked scores: exp of it underflows to exactly 0 in f32. */
const MASKED = -1e9;

export function createTfTransformer(
  tf: Tf,
  shape: TfTransformerShape,
  tensors: Record<string, Float32Array>,
  hyper: AdamwHyper,
): TfTransformer {
  const { vocab, context: T, width: D, heads: H } = shape;
  const dh = D / H;
  const variable = (name: string, dims: number[]) => {
    const values = tensors[name];
    const size = dims.reduce((a, b) => a * b, 1);
    if (!values || values.length !== size)
      throw new Error(
        `tfjs-transformer: tensor ${name} needs ${size} values [${dims}], got ${values?.length ?? 'none'}`,
      );
    return tf.variable(tf.tensor(values, dims), true, name);
  };
  const ln = (prefix: string) => ({ w: variable(`${prefix}.weight`, [D]), b: variable(`${prefix}.bias`, [D]) });
  const linear = (prefix: string, out: number, inF: number) => ({
    w: variable(`${prefix}.weight`, [out, inF]),
    b: variable(`${prefix}.bias`, [out]),
  });
  // Created in the state dict's order, so the variables list reads like docs/MODELS.md's table.
  const tok = variable('tok.weight', [vocab, D]);
  const pos = variable('pos.weight', [T, D]);
  const blocks = Array.from({ length: shape.layers }, (_, n) => {
    const p = `blocks.${n}`;
    return {
      ln1: ln(`${p}.ln1`),
      qkv: linear(`${p}.qkv`, 3 * D, D),
      proj: linear(`${p}.proj`, D, D),
      ln2: ln(`${p}.ln2`),
      fc: linear(`${p}.fc`, 4 * D, D),
      out: linear(`${p}.out`, D, 4 * D),
    };
  });
  const lnf = ln('lnf');
  const head = linear('head', vocab, D);
  const params: Tf[] = [
    tok,
    pos,
    ...blocks.flatMap((b) => [
      b.ln1.w,
      b.ln1.b,
      b.qkv.w,
      b.qkv.b,
      b.proj.w,
      b.proj.b,
      b.ln2.w,
      b.ln2.b,
      b.fc.w,
      b.fc.b,
      b.out.w,
      b.out.b,
    ]),
    lnf.w,
    lnf.b,
    head.w,
    head.b,
  ];
  const m = params.map((p) => tf.variable(tf.zerosLike(p), false));
  const v = params.map((p) => tf.variable(tf.zerosLike(p), false));
  // Query i may look at keys 0..i: 0 on and below the diagonal, MASKED above.
  const mask = tf.tensor2d(
    Float32Array.from({ length: T * T }, (_, k) => (k % T > Math.floor(k / T) ? MASKED : 0)),
    [T, T],
  );
  const scale = 1 / Math.sqrt(dh);
  let stepCount = 0;

  /** x [rows, D] → [rows, D] */
  const layerNorm = (x: Tf, p: { w: Tf; b: Tf }) => {
    const mean = tf.mean(x, -1, true);
    const centred = tf.sub(x, mean);
    const variance = tf.mean(tf.square(centred), -1, true);
    return tf.add(tf.mul(tf.mul(centred, tf.rsqrt(tf.add(variance, LAYER_NORM_EPS))), p.w), p.b);
  };
  /** x [rows, in] → [rows, out], W [out, in] as PyTorch's Linear. */
  const dense = (x: Tf, p: { w: Tf; b: Tf }) => tf.add(tf.matMul(x, p.w, false, true), p.b);
  /** Exact GELU, PyTorch's default: x·Φ(x) = ½x(1 + erf(x/√2)). */
  const gelu = (x: Tf) => tf.mul(tf.mul(x, 0.5), tf.add(tf.erf(tf.mul(x, Math.SQRT1_2)), 1));
  /** [B·T, D] → [B, H, T, dh] */
  const splitHeads = (x: Tf, B: number) => tf.transpose(tf.reshape(x, [B, T, H, dh]), [0, 2, 1, 3]);

  /** Logits [B·T, vocab] of ids [B, T]. */
  const forward = (ids: Tf, B: number) => {
    let h = tf.reshape(tf.add(tf.gather(tok, ids), pos), [B * T, D]);
    for (const blk of blocks) {
      const [q, k, val] = tf.split(dense(layerNorm(h, blk.ln1), blk.qkv), 3, 1).map((z: Tf) => splitHeads(z, B));
      const weights = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), scale), mask));
      const y = tf.reshape(tf.transpose(tf.matMul(weights, val), [0, 2, 1, 3]), [B * T, D]);
      h = tf.add(h, dense(y, blk.proj));
      h = tf.add(h, dense(gelu(dense(layerNorm(h, blk.ln2), blk.fc)), blk.out));
    }
    return dense(layerNorm(h, lnf), head);
  };

  return {
    paramCount: params.reduce((n, p) => n + p.size, 0),
    step(idsData, targetsData) {
      const B = idsData.length / T;
      let counted = 0;
      for (const t of targetsData) if (t >= 0) counted++;
      stepCount++;
      return tf.tidy(() => {
        const ids = tf.tensor2d(Int32Array.from(idsData), [B, T], 'int32');
        const targets = tf.tensor1d(
          Int32Array.from(targetsData, (t) => Math.max(t, 0)),
          'int32',
        );
        const counts = tf.tensor1d(Float32Array.from(targetsData, (t) => (t >= 0 ? 1 : 0)));
        const { value, grads } = tf.variableGrads(() => {
          const logp = tf.logSoftmax(forward(ids, B));
          const picked = tf.sum(tf.mul(tf.oneHot(targets, vocab), logp), 1);
          return tf.div(tf.neg(tf.sum(tf.mul(picked, counts))), Math.max(counted, 1));
        }, params);
        const { lr, beta1, beta2, eps, weightDecay } = hyper;
        const bc1 = 1 - beta1 ** stepCount;
        const bc2 = 1 - beta2 ** stepCount;
        params.forEach((p, i) => {
          const g = grads[p.name];
          m[i].assign(tf.add(tf.mul(m[i], beta1), tf.mul(g, 1 - beta1)));
          v[i].assign(tf.add(tf.mul(v[i], beta2), tf.mul(tf.square(g), 1 - beta2)));
          const adam = tf.div(tf.div(m[i], bc1), tf.add(tf.sqrt(tf.div(v[i], bc2)), eps));
          p.assign(tf.sub(p, tf.mul(tf.add(adam, tf.mul(p, weightDecay)), lr)));
        });
        return value;
      });
    },
    dispose() {
      for (const t of [...params, ...m, ...v, mask]) t.dispose();
    },
  };
}
