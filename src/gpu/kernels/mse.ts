/** Mean squared error, loss (one deterministic workgroup) and gradient. See shaders/mse.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkBindings } from './conv2d.ts';
import { checkDims } from './matmul.ts';
import { accumulateConstant, planEntry } from './plan-entry.ts';

export interface MseOptions {
  outIndex?: number;
  /** Multiplies the gradient (the loss's upstream gradient); 1 by default. */
  gradScale?: number;
  accumulate?: boolean;
}

/** result[outIndex] = mean((pred − target)²); dpred (=, or +=) its gradient. Two dispatches. */
export function planMse(gpu: Gpu, b: { pred: Binding; target: Binding; result: Binding; dpred: Binding }, n: number, opts: MseOptions = {}): Dispatch[] {
  checkDims('mse', { n });
  const outIndex = opts.outIndex ?? 0;
  checkBindings('mse', { pred: [b.pred, n], target: [b.target, n], result: [b.result, outIndex + 1], dpred: [b.dpred, n] }, { n });
  const u = gpu.uniform([['u32', n], ['u32', outIndex], ['f32', opts.gradScale ?? 1], ['u32', 0]], 'mse-dims');
  return [
    planEntry(gpu, 'mse', 'forward', [[0, u], [1, b.pred], [2, b.target], [3, b.result]], [1]),
    planEntry(gpu, 'mse', 'backward', [[0, u], [1, b.pred], [2, b.target], [4, b.dpred]], linearGroups(n, 256), accumulateConstant(opts.accumulate)),
  ];
}
