/**
 * The ops as functions on symbolic tensors, for `forward` methods:
 *   const h = F.relu(F.linear(x, this.weight, this.bias));
 * Parameters may be passed where a tensor is expected.
 */
import { addOp, conv2dOp, geluTanhOp, linearOp, matmulOp, maxPool2dOp, reluOp, reshapeOp, tanhOp } from './ops/index.ts';
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
