/**
 * The ops as functions on symbolic tensors, for `forward` methods:
 *   const h = F.relu(F.linear(x, this.weight, this.bias));
 * Parameters may be passed where a tensor is expected.
 */
import {
  addBroadcastOp, addOp, attentionOp, bmmOp, concatOp, conv2dOp, crossEntropyOp, dropoutOp, embeddingOp, geluOp, geluTanhOp, layerNormOp, linearOp,
  matmulOp, maxPool2dOp, mseOp, mulOp, permuteOp, reluOp, reshapeOp, scaleOp, sliceOp, softmaxOp, tanhOp,
} from './ops/index.ts';
import { apply, type Parameter, type Tensor } from './tensor.ts';

type T = Tensor | Parameter;

export const linear = (x: Tensor, weight: T, bias?: T): Tensor => apply(linearOp, bias ? [x, weight, bias] : [x, weight], {});
export const matmul = (a: T, b: T): Tensor => apply(matmulOp, [a, b], {});
export const relu = (x: Tensor): Tensor => apply(reluOp, [x], {});
export const tanh = (x: Tensor): Tensor => apply(tanhOp, [x], {});
/** GELU, tanh approximation. */
export const geluTanh = (x: Tensor): Tensor => apply(geluTanhOp, [x], {});
export const add = (a: T, b: T): Tensor => apply(addOp, [a, b], {});
export const conv2d = (x: Tensor, weight: T, bias: T, pad = 0): Tensor => apply(conv2dOp, [x, weight, bias], { pad });
export const maxPool2d = (x: Tensor): Tensor => apply(maxPool2dOp, [x], {});
export const reshape = (x: Tensor, shape: number[]): Tensor => apply(reshapeOp, [x], { shape });
/** [N, …] → [N, ∏…]. */
export const flatten = (x: Tensor): Tensor => reshape(x, [x.shape[0], x.size / x.shape[0]]);
/** GELU, exact (erf) form: PyTorch's nn.GELU() default. */
export const gelu = (x: Tensor): Tensor => apply(geluOp, [x], {});
/** Layer norm over the last dimension (nn.LayerNorm). */
export const layerNorm = (x: Tensor, weight: T, bias: T, eps?: number): Tensor => apply(layerNormOp, [x, weight, bias], eps === undefined ? {} : { eps });
/** Softmax over the last dimension. */
export const softmax = (x: Tensor): Tensor => apply(softmaxOp, [x], {});
/** Rows of `weight` [vocab, dim] picked by u32 `ids` […] → […, dim]. */
export const embedding = (ids: Tensor, weight: T): Tensor => apply(embeddingOp, [ids, weight], {});
/** Multi-head self-attention over packed qkv [batch, T, 3·D] → [batch, T, D] (causal unless told otherwise). */
export const attention = (qkv: Tensor, heads: number, causal = true): Tensor => apply(attentionOp, [qkv], { heads, causal });
/** Batched matmul [b, m, k]·[b, k, n] (or a shared [k, n]), optional transposes. */
export const bmm = (a: T, b: T, options: { transA?: boolean; transB?: boolean } = {}): Tensor => apply(bmmOp, [a, b], { ...options });
/** a + alpha·b with broadcasting (trailing dimensions, NumPy rules). */
export const addBroadcast = (a: T, b: T, alpha?: number): Tensor => apply(addBroadcastOp, [a, b], alpha === undefined ? {} : { alpha });
export const mul = (a: T, b: T): Tensor => apply(mulOp, [a, b], {});
export const scale = (x: Tensor, alpha: number): Tensor => apply(scaleOp, [x], { alpha });
export const permute = (x: Tensor, perm: number[]): Tensor => apply(permuteOp, [x], { perm });
export const slice = (x: Tensor, axis: number, start: number, length: number): Tensor => apply(sliceOp, [x], { axis, start, length });
export const concat = (xs: Tensor[], axis: number): Tensor => apply(concatOp, xs, { axis });
/** Inverted dropout with a seeded mask (identity when training is false or p is 0). */
export const dropout = (x: Tensor, p: number, seed: number, training = true): Tensor => apply(dropoutOp, [x], { p, seed, training });
/** Mean squared error → [1]. */
export const mseLoss = (pred: Tensor, target: T): Tensor => apply(mseOp, [pred, target], {});
/** Mean cross-entropy of logits […, C] against u32 targets […] (−1 ignored) → [1]. */
export const crossEntropy = (logits: Tensor, targets: Tensor): Tensor => apply(crossEntropyOp, [logits, targets], {});
