/**
 * RMSNorm (torch.nn.RMSNorm, as in LLaMA): y = x / √(mean(x²) + ε) · weight
 * over the last dimension, with no mean subtracted and no bias. Written with
 * the primitives (mul, mean, rsqrt), so it has no kernel and no oracle of its
 * own: the planner differentiates the composition, and the primitives' f64
 * oracles are its reference.
 */
import { positive } from '../../init.ts';
import { Module } from '../../module.ts';
import { Parameter, type Tensor } from '../../tensor.ts';
import { mul } from '../broadcast/index.ts';
import { mean } from '../row-reduce/index.ts';
import { rsqrt } from '../unary/index.ts';

/** torch.nn.RMSNorm's default ε when none is given: the f32 machine epsilon. */
const RMS_NORM_EPS = 2 ** -23;

// The functional form, for `forward` methods (nn.F).
/** RMSNorm over the last dimension; `weight` [C] scales the result when given. */
export const rmsNorm = (x: Tensor, weight?: Tensor | Parameter, eps = RMS_NORM_EPS): Tensor => {
  // mean keeps the reduced dimension as 1, so the [..., 1] factor broadcasts back over each row.
  const normed = mul(x, rsqrt(mean(mul(x, x)), eps));
  return weight ? mul(normed, weight) : normed;
};

/** nn.RMSNorm(dim): weight [dim], ones. */
export class RMSNorm extends Module {
  readonly weight: Parameter;
  constructor(
    dim: number,
    readonly eps = RMS_NORM_EPS,
  ) {
    super();
    positive('RMSNorm', { dim });
    this.weight = new Parameter([dim], (out) => out.fill(1));
  }
  forward(x: Tensor): Tensor {
    return rmsNorm(x, this.weight, this.eps);
  }
}
