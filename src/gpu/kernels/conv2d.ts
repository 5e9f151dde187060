/**
 * conv2d on the GPU: forward, gradient wrt the input, gradient wrt weights and
 * bias. Stride 1, zero padding, NCHW activations, OIHW weights (see
 * conv2d_reference.ts for the math and why this layout).
 *
 * Each `plan*` checks the shape, writes the shape into a uniform buffer and
 * returns a Dispatch to record every step; bindings may be whole buffers or
 * ranges of the model's flat parameter/gradient buffers.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { type Binding, type Dispatch, type Gpu, linearGroups } from '../gpu.ts';
import { type ConvShape, checkConvShape, convSizes } from './conv2d_reference.ts';

export { type ConvShape, convOutSize, convSizes, samePadding } from './conv2d_reference.ts';

/** Output (or input) channels one thread of forward (backward_input) computes. */
const CHANNEL_BLOCK = 4;
const WORKGROUP = 64;
/** The widest kernel row conv2d_backward_weight.wgsl keeps in registers. */
export const MAX_KERNEL_WIDTH = 11;

function checked(s: ConvShape): { oh: number; ow: number } {
  const o = checkConvShape(s);
  if (s.kw > MAX_KERNEL_WIDTH) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `conv2d: kernels up to ${MAX_KERNEL_WIDTH} wide are supported, got ${s.kw}`, { shape: { ...s } });
  }
  return o;
}

/** Bytes a binding exposes to a shader. */
export function bindingBytes(b: Binding): number {
  if ('buffer' in b) return b.size ?? b.buffer.size - (b.offset ?? 0);
  return b.size;
}

/** A too-small binding would be read or written out of bounds (clamped, silently wrong): refuse it. */
export function checkBindings(kernel: string, bindings: Record<string, [Binding, number]>, detail: object): void {
  for (const [name, [binding, words]] of Object.entries(bindings)) {
    const have = bindingBytes(binding);
    if (have < words * 4) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${kernel}: buffer '${name}' holds ${Math.floor(have / 4)} values, the shape needs ${words}; allocate it from the same shape`,
        { kernel, buffer: name, have: Math.floor(have / 4), need: words, ...detail },
      );
    }
  }
}

function shapeUniform(gpu: Gpu, s: ConvShape, oh: number, ow: number, label: string): GPUBuffer {
  return gpu.uniform(
    [['u32', s.n], ['u32', s.cin], ['u32', s.h], ['u32', s.w], ['u32', s.cout], ['u32', s.kh], ['u32', s.kw], ['u32', s.pad], ['u32', oh], ['u32', ow], ['u32', 0], ['u32', 0]],
    label,
  );
}

/** y[n, cout, oh, ow] = conv(x[n, cin, h, w], weight[cout, cin, kh, kw]) + bias[cout]. */
export function planConv2dForward(gpu: Gpu, s: ConvShape, x: Binding, weight: Binding, bias: Binding, y: Binding): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings('conv2d forward', { x: [x, sz.x], weight: [weight, sz.weight], bias: [bias, sz.bias], y: [y, sz.y] }, { shape: { ...s } });
  const params = shapeUniform(gpu, s, oh, ow, 'conv2d-forward-shape');
  return gpu.plan('conv2d_forward', [params, x, weight, bias, y], [Math.ceil((s.n * oh * ow) / WORKGROUP), Math.ceil(s.cout / CHANNEL_BLOCK)]);
}

/** dx[n, cin, h, w] from dy[n, cout, oh, ow] and weight[cout, cin, kh, kw]. Overwrites dx. */
export function planConv2dBackwardInput(gpu: Gpu, s: ConvShape, dy: Binding, weight: Binding, dx: Binding): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings('conv2d backward input', { dy: [dy, sz.y], weight: [weight, sz.weight], dx: [dx, sz.x] }, { shape: { ...s } });
  const params = shapeUniform(gpu, s, oh, ow, 'conv2d-backward-input-shape');
  return gpu.plan('conv2d_backward_input', [params, dy, weight, dx], [Math.ceil((s.n * s.h * s.w) / WORKGROUP), Math.ceil(s.cin / CHANNEL_BLOCK)]);
}

/** dweight[cout, cin, kh, kw] and dbias[cout] from dy and x, summed over the batch. Overwrites both. */
export function planConv2dBackwardWeight(gpu: Gpu, s: ConvShape, dy: Binding, x: Binding, dweight: Binding, dbias: Binding): Dispatch {
  const { oh, ow } = checked(s);
  const sz = convSizes(s);
  checkBindings('conv2d backward weight', { dy: [dy, sz.y], x: [x, sz.x], dweight: [dweight, sz.weight], dbias: [dbias, sz.bias] }, { shape: { ...s } });
  const params = shapeUniform(gpu, s, oh, ow, 'conv2d-backward-weight-shape');
  // One workgroup per kernel row (cout*cin*kh of them), then one per bias entry.
  const rows = s.cout * s.cin * s.kh + s.cout;
  return gpu.plan('conv2d_backward_weight', [params, dy, x, dweight, dbias], linearGroups(rows, 1));
}
