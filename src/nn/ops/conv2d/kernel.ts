/**
 * conv2d on the GPU: forward, gradient wrt the input, gradient wrt weights and
 * bias. Stride 1, zero padding, NCHW activations, OIHW weights (see
 * reference.ts for the math and why this layout).
 *
 * Each `plan*` checks the shape, writes the shape into a uniform buffer and
 * returns a Dispatch to record every step; bindings may be whole buffers or
 * ranges of the model's flat parameter/gradient buffers.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { type Binding, type Dispatch, type Gpu, linearGroups } from '../../../gpu/gpu.ts';
import { checkBindings } from '../../../gpu/kernels/common.ts';
import { type ConvShape, checkConvShape, convSizes } from './reference.ts';
import { gpuScratch, planColumnSum, type Scratch, scratchRanges } from '../../../gpu/kernels/reduce-rows.ts';

export { type ConvShape, convOutSize, convSizes, samePadding } from './reference.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('conv2d', { shader: 'conv2d_forward', entryPoints: ['main'] });
defineKernel('conv2dFlip', { shader: 'conv2d_forward', entryPoints: ['main'], constants: { FLIP: 1, HAS_BIAS: 0 } });
defineKernel('conv2dWeightGrad', { shader: 'conv2d_backward_weight', entryPoints: ['main'] });

/** Output channels one thread of conv2d_forward (and a workgroup of conv2d_backward_weight) computes: vec4 accumulators. */
const CHANNEL_BLOCK = 4;
/** Output pixels one thread of conv2d_forward computes along x. */
const PIXEL_BLOCK = 8;
const WORKGROUP = 64;
/** conv2d_backward_weight keeps one kernel row (up to 8 taps) of 4 filters in named registers. */
export const MAX_KERNEL_WIDTH = 8;

function checked(s: ConvShape): { oh: number; ow: number } {
  const o = checkConvShape(s);
  if (s.kw > MAX_KERNEL_WIDTH) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `conv2d: kernels up to ${MAX_KERNEL_WIDTH} wide are supported, got ${s.kw}`,
      { shape: { ...s } },
    );
  }
  if (s.pad >= s.kh || s.pad >= s.kw) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `conv2d: pad ${s.pad} must be smaller than the kernel (${s.kh}x${s.kw}); more padding only adds zero borders`,
      { shape: { ...s } },
    );
  }
  return o;
}

type ShaderDims = [
  n: number,
  cin: number,
  h: number,
  w: number,
  cout: number,
  kh: number,
  kw: number,
  padY: number,
  padX: number,
  oh: number,
  ow: number,
];

function shapeUniform(gpu: Gpu, dims: ShaderDims, label: string): GPUBuffer {
  return gpu.uniform(
    [...dims, 0].map((v) => ['u32', v] as ['u32', number]),
    label,
  );
}

/** y[n, cout, oh, ow] = conv(x[n, cin, h, w], weight[cout, cin, kh, kw]) + bias[cout]. */
export function planConv2dForward(
  gpu: Gpu,
  s: ConvShape,
  x: Binding,
  weight: Binding,
  bias: Binding,
  y: Binding,
): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings(
    'conv2d forward',
    { x: [x, sz.x], weight: [weight, sz.weight], bias: [bias, sz.bias], y: [y, sz.y] },
    { shape: { ...s } },
  );
  const params = shapeUniform(
    gpu,
    [s.n, s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.pad, s.pad, oh, ow],
    'conv2d-forward-shape',
  );
  const tiles = s.n * oh * Math.ceil(ow / PIXEL_BLOCK);
  return gpu.plan(
    'conv2d_forward',
    [params, x, weight, bias, y],
    [Math.ceil(tiles / WORKGROUP), Math.ceil(s.cout / CHANNEL_BLOCK)],
    {
      constants: { FLIP: 0, HAS_BIAS: 1 },
    },
  );
}

/**
 * dx[n, cin, h, w] from dy[n, cout, oh, ow] and weight[cout, cin, kh, kw]. Overwrites dx.
 * Runs the forward kernel on the transposed problem: dy convolved with the
 * rotated, channel-swapped kernel, padded by kh-1-pad rows and kw-1-pad columns.
 */
export function planConv2dBackwardInput(gpu: Gpu, s: ConvShape, dy: Binding, weight: Binding, dx: Binding): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings(
    'conv2d backward input',
    { dy: [dy, sz.y], weight: [weight, sz.weight], dx: [dx, sz.x] },
    { shape: { ...s } },
  );
  const params = shapeUniform(
    gpu,
    [s.n, s.cout, oh, ow, s.cin, s.kh, s.kw, s.kh - 1 - s.pad, s.kw - 1 - s.pad, s.h, s.w],
    'conv2d-backward-input-shape',
  );
  const tiles = s.n * s.h * Math.ceil(s.w / PIXEL_BLOCK);
  return gpu.plan(
    'conv2d_forward',
    [params, dy, weight, gpu.dummy, dx],
    [Math.ceil(tiles / WORKGROUP), Math.ceil(s.cin / CHANNEL_BLOCK)],
    {
      constants: { FLIP: 1, HAS_BIAS: 0 },
    },
  );
}

/**
 * dweight[cout, cin, kh, kw] and dbias[cout] from dy and x, summed over the
 * whole batch by each workgroup: one dispatch whose workgroups do not grow
 * with the batch (kept for bench/conv.ts); the ops use the split form.
 */
export function planConv2dBackwardWeight(
  gpu: Gpu,
  s: ConvShape,
  dy: Binding,
  x: Binding,
  dweight: Binding,
  dbias: Binding,
): Dispatch {
  return weightGradDispatch(gpu, s, dy, x, dweight, dbias, s.n);
}

function weightGradDispatch(
  gpu: Gpu,
  s: ConvShape,
  dy: Binding,
  x: Binding,
  dweight: Binding,
  dbias: Binding,
  perSlice: number,
): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings('conv2d backward weight', { dy: [dy, sz.y], x: [x, sz.x] }, { shape: { ...s } });
  const params = gpu.uniform(
    [s.n, s.cin, s.h, s.w, s.cout, s.kh, s.kw, s.pad, s.pad, oh, ow, perSlice].map(
      (v) => ['u32', v] as ['u32', number],
    ),
    'conv2d-backward-weight-shape',
  );
  // One workgroup per kernel row (ci, ky) of each block of 4 filters, then one per block for the biases; grid z: the
  // batch slices.
  const blocks = Math.ceil(s.cout / CHANNEL_BLOCK);
  const [gx, gy] = linearGroups(blocks * (s.cin * s.kh + 1), 1);
  return gpu.plan('conv2d_backward_weight', [params, dy, x, dweight, dbias], [gx, gy, Math.ceil(s.n / perSlice)]);
}

/** Output-pixel segments (8 pixels) a workgroup of a split weight gradient sums: 8 per invocation. */
const WEIGHT_GRAD_SEGMENTS = 512;
const WEIGHT_GRAD_MAX_PARTIAL = 1 << 22;

/** Images per batch slice of the weight gradient, and the slices. */
export function conv2dWeightGradSlices(s: ConvShape): { perSlice: number; slices: number } {
  const { oh, ow } = checkConvShape(s);
  const segsPerImage = oh * Math.ceil(ow / 8);
  const sz = convSizes(s);
  let perSlice = Math.max(1, Math.ceil(WEIGHT_GRAD_SEGMENTS / segsPerImage));
  perSlice = Math.max(
    perSlice,
    Math.ceil(s.n / Math.max(1, Math.floor(WEIGHT_GRAD_MAX_PARTIAL / (sz.weight + sz.bias)))),
  );
  perSlice = Math.min(perSlice, s.n);
  return { perSlice, slices: Math.ceil(s.n / perSlice) };
}

/**
 * dweight and dbias (overwritten) summed over the batch in slices of images
 * (`conv2dWeightGradSlices`): each slice's partial sums into scratch, then a
 * column-sum tree (reduce-rows.ts) over the slices, so the workgroups grow
 * with the batch; one dispatch when one slice holds the batch.
 */
export function planConv2dBackwardWeightSteps(
  gpu: Gpu,
  s: ConvShape,
  dy: Binding,
  x: Binding,
  dweight: Binding,
  dbias: Binding,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checked(s);
  const sz = convSizes(s);
  checkBindings(
    'conv2d backward weight',
    { dweight: [dweight, sz.weight], dbias: [dbias, sz.bias] },
    { shape: { ...s } },
  );
  const { perSlice, slices } = conv2dWeightGradSlices(s);
  if (slices === 1) return [weightGradDispatch(gpu, s, dy, x, dweight, dbias, s.n)];
  const [pw, pb] = scratchRanges(scratch, [slices * sz.weight, slices * sz.bias], 'conv2d-weight-grad-partials');
  return [
    weightGradDispatch(gpu, s, dy, x, pw, pb, perSlice),
    ...planColumnSum(gpu, pw, dweight, { rows: slices, cols: sz.weight }, scratch),
    ...planColumnSum(gpu, pb, dbias, { rows: slices, cols: sz.bias }, scratch),
  ];
}
