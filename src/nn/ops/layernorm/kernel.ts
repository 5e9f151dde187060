/**
 * Layer norm over the last dimension, forward (saving mean and rstd per row)
 * and backward (input, weight and bias gradients). See shaders/layernorm.wgsl.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { gpuScratch, planColumnSum, type Scratch, scratchRanges } from '../../../gpu/kernels/reduce-rows.ts';
import {
  accumulateConstant,
  checkBindings,
  checkDims,
  rowEntry,
  planEntry,
  type Reduction,
} from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('layerNorm', { shader: 'layernorm', entryPoints: ['forward', 'backward_input', 'backward_params'] });
defineKernel('layerNormSubgroups', {
  shader: 'layernorm+subgroups',
  entryPoints: ['forward_rows', 'backward_input_rows'],
  requires: 'subgroups',
});

/** Rows per chunk of the parameter gradients' first pass (see shaders/layernorm.wgsl). */
export const LAYER_NORM_PARAM_CHUNK = 64;

/** PyTorch's nn.LayerNorm default. */
export const LAYER_NORM_EPS = 1e-5;

export interface LayerNormShape {
  rows: number;
  /** The normalised (last) dimension; weight and bias have this length. */
  cols: number;
  eps?: number;
}

function dims(gpu: Gpu, s: LayerNormShape): GPUBuffer {
  checkDims('layerNorm', { rows: s.rows, cols: s.cols });
  return gpu.uniform(
    [
      ['u32', s.rows],
      ['u32', s.cols],
      ['f32', s.eps ?? LAYER_NORM_EPS],
      ['u32', LAYER_NORM_PARAM_CHUNK],
    ],
    'layernorm-dims',
  );
}

/**
 * y = layerNorm(x) · weight + bias; stats [rows × 2] receives (mean, rstd) per row for backward.
 * `reduction` forces a variant (default: the Gpu's).
 */
export function planLayerNormForward(
  gpu: Gpu,
  s: LayerNormShape,
  b: { x: Binding; weight: Binding; bias: Binding; y: Binding; stats: Binding },
  reduction?: Reduction,
): Dispatch {
  const n = s.rows * s.cols;
  checkBindings(
    'layerNorm forward',
    { x: [b.x, n], weight: [b.weight, s.cols], bias: [b.bias, s.cols], y: [b.y, n], stats: [b.stats, 2 * s.rows] },
    { shape: { ...s } },
  );
  const u = dims(gpu, s);
  const v = rowEntry(gpu, 'layernorm', 'forward', s.rows, reduction);
  return planEntry(
    gpu,
    v.key,
    v.entry,
    [
      [0, u],
      [1, b.x],
      [2, b.weight],
      [3, b.bias],
      [4, b.y],
      [5, b.stats],
    ],
    v.groups,
  );
}

export interface LayerNormBackwardBuffers {
  x: Binding;
  weight: Binding;
  /** What forward wrote to `stats`. */
  stats: Binding;
  dy: Binding;
  dx: Binding;
  dweight: Binding;
  dbias: Binding;
}

/**
 * dx, dweight, dbias from dy. `accumulate` adds into dx, `accumulateParams`
 * into dweight/dbias, instead of overwriting. The parameter gradients are sums
 * over rows: per-chunk partials (64 rows each) and then a column-sum tree
 * (reduce-rows.ts) into dweight and dbias, so the work spreads over
 * workgroups that grow with the rows; `scratch` holds the partials.
 */
export function planLayerNormBackward(
  gpu: Gpu,
  s: LayerNormShape,
  b: LayerNormBackwardBuffers,
  opts: { accumulate?: boolean; accumulateParams?: boolean; scratch?: Scratch; reduction?: Reduction } = {},
): Dispatch[] {
  const n = s.rows * s.cols;
  checkBindings(
    'layerNorm backward',
    {
      x: [b.x, n],
      weight: [b.weight, s.cols],
      stats: [b.stats, 2 * s.rows],
      dy: [b.dy, n],
      dx: [b.dx, n],
      dweight: [b.dweight, s.cols],
      dbias: [b.dbias, s.cols],
    },
    { shape: { ...s } },
  );
  const u = dims(gpu, s);
  const v = rowEntry(gpu, 'layernorm', 'backward_input', s.rows, opts.reduction);
  const input = planEntry(
    gpu,
    v.key,
    v.entry,
    [
      [0, u],
      [1, b.x],
      [2, b.weight],
      [6, b.dy],
      [7, b.stats],
      [8, b.dx],
    ],
    v.groups,
    accumulateConstant(opts.accumulate),
  );
  const chunks = Math.ceil(s.rows / LAYER_NORM_PARAM_CHUNK);
  const params = (dweight: Binding, dbias: Binding, accumulate: boolean | undefined) =>
    planEntry(
      gpu,
      'layernorm',
      'backward_params',
      [
        [0, u],
        [1, b.x],
        [6, b.dy],
        [7, b.stats],
        [9, dweight],
        [10, dbias],
      ],
      linearGroups(chunks * s.cols, 64),
      accumulateConstant(accumulate),
    );
  if (chunks === 1) return [input, params(b.dweight, b.dbias, opts.accumulateParams)];
  const scratch = opts.scratch ?? gpuScratch(gpu);
  const [pw, pb] = scratchRanges(scratch, [chunks * s.cols, chunks * s.cols], 'layernorm-param-partials');
  return [
    input,
    params(pw, pb, false),
    ...planColumnSum(
      gpu,
      pw,
      b.dweight,
      { rows: chunks, cols: s.cols, accumulate: opts.accumulateParams, reduction: opts.reduction },
      scratch,
    ),
    ...planColumnSum(
      gpu,
      pb,
      b.dbias,
      { rows: chunks, cols: s.cols, accumulate: opts.accumulateParams, reduction: opts.reduction },
      scratch,
    ),
  ];
}
