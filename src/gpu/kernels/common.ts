/**
 * What most kernel wrappers share: checks of their sizes and buffers, and
 * `planEntry`, which plans one entry point of a multi-entry shader. Kept apart
 * from any one kernel so that a kernel file imports only helpers, never
 * another kernel.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { type Binding, bindingBytes, type Dispatch, type Gpu } from '../gpu.ts';

export { bindingBytes };

/** Every size a kernel writes into its uniform is a positive integer (0 or NaN would dispatch nothing or garbage). */
export function checkDims(what: string, dims: Record<string, number>): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${name} must be a positive integer, got ${v}`, { ...dims });
    }
  }
}

/** Every binding holds at least the values its shape needs: a short buffer would read or write past its end silently. */
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

const MAX_GROUPS_PER_DIM = 65535;

/** The shader's kernels read or write in place of their output: `+=` where true. */
export function accumulateConstant(accumulate: boolean | undefined): Record<string, number> {
  return { ACCUMULATE: accumulate ? 1 : 0 };
}

/**
 * Plans one entry point of a multi-entry shader whose entry points use
 * different subsets of the module's bindings. `Gpu.plan` numbers bindings
 * 0..n-1, which only fits when every entry point uses them all; here each
 * binding carries its `@binding` number, so a shader can name its buffers by
 * what they hold (x, dy, dx, ...) instead of sharing generic slots.
 */
export function planEntry(
  gpu: Gpu,
  key: string,
  entryPoint: string,
  bindings: [number, Binding][],
  workgroups: [number, number?, number?],
  constants: Record<string, number> = {},
): Dispatch {
  const pipeline = gpu.pipeline(key, { entryPoint, constants });
  const label = `${key}:${entryPoint}`;
  const [x, y = 1, z = 1] = workgroups;
  if (x > MAX_GROUPS_PER_DIM || y > MAX_GROUPS_PER_DIM || z > MAX_GROUPS_PER_DIM) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${label}: ${x}x${y}x${z} workgroups exceed ${MAX_GROUPS_PER_DIM} per dimension; split the work`, { workgroups });
  }
  const max = gpu.limits.maxStorageBufferBindingSize;
  for (const [, b] of bindings) {
    const size = bindingBytes(b);
    if (size > max) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${label} would bind ${size} bytes, more than this adapter's maxStorageBufferBindingSize of ${max}; use a smaller batch or layer`, { size, max, label });
    }
  }
  const bindGroup = gpu.device.createBindGroup({
    label,
    layout: pipeline.getBindGroupLayout(0),
    entries: bindings.map(([binding, b]) => ({ binding, resource: 'buffer' in b ? b : { buffer: b } })),
  });
  const boundBytes = bindings.reduce((sum, [, b]) => sum + bindingBytes(b), 0);
  return { label, pipeline, bindGroup, workgroups: [x, y, z], boundBytes };
}
