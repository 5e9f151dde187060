/** Mean squared error, loss (deterministic sums over chunks of values, then a column-sum tree) and gradient. See shaders/mse.wgsl. */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { gpuScratch, planSumTree, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('mse', { shader: 'mse', entryPoints: ['forward', 'backward'] });

/** Values one workgroup of the loss sums. */
const MSE_CHUNK = 1024;

export interface MseGradOptions {
  /** Multiplies the gradient; 1 by default. */
  gradScale?: number;
  /** Also multiplies the gradient by upstream[0] (∂/∂loss, when the loss is an op inside a graph). */
  upstream?: Binding;
  accumulate?: boolean;
}

function dims(gpu: Gpu, n: number, outIndex: number, gradScale: number): GPUBuffer {
  checkDims('mse', { n });
  return gpu.uniform(
    [
      ['u32', n],
      ['u32', outIndex],
      ['f32', gradScale],
      ['u32', 0],
    ],
    'mse-dims',
  );
}

/** result[outIndex] = mean((pred − target)²): per-chunk sums, then (several chunks) their sum. */
export function planMseLoss(
  gpu: Gpu,
  b: { pred: Binding; target: Binding; result: Binding },
  n: number,
  outIndex = 0,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checkBindings('mse', { pred: [b.pred, n], target: [b.target, n], result: [b.result, outIndex + 1] }, { n });
  const chunks = Math.ceil(n / MSE_CHUNK);
  const u = dims(gpu, n, outIndex, 1);
  if (chunks === 1)
    return [
      planEntry(
        gpu,
        'mse',
        'forward',
        [
          [0, u],
          [1, b.pred],
          [2, b.target],
          [3, b.result],
        ],
        [1],
        { PARTIAL: 0 },
      ),
    ];
  const partials = scratch(chunks, 'mse-partials');
  return [
    planEntry(
      gpu,
      'mse',
      'forward',
      [
        [0, u],
        [1, b.pred],
        [2, b.target],
        [3, partials],
      ],
      linearGroups(chunks, 1),
      { PARTIAL: 1 },
    ),
    ...planSumTree(gpu, partials, b.result, chunks, { outIndex, scale: 1 / n }, scratch),
  ];
}

/** dpred (=, or += with `accumulate`) gradScale · 2 (pred − target) / n (· upstream[0]). */
export function planMseGrad(
  gpu: Gpu,
  b: { pred: Binding; target: Binding; dpred: Binding },
  n: number,
  opts: MseGradOptions = {},
): Dispatch {
  checkBindings('mse gradient', { pred: [b.pred, n], target: [b.target, n], dpred: [b.dpred, n] }, { n });
  // The shader names `upstream` behind HAS_UPSTREAM, so the layout always has it.
  return planEntry(
    gpu,
    'mse',
    'backward',
    [
      [0, dims(gpu, n, 0, opts.gradScale ?? 1)],
      [1, b.pred],
      [2, b.target],
      [4, b.dpred],
      [5, opts.upstream ?? gpu.dummy],
    ],
    linearGroups(n, 256),
    {
      ...accumulateConstant(opts.accumulate),
      HAS_UPSTREAM: opts.upstream ? 1 : 0,
    },
  );
}
