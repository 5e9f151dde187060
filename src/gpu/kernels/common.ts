/**
 * What most kernel wrappers share: checks of their sizes and buffers, and
 * `planEntry`, which plans one entry point of a multi-entry shader. Kept apart
 * from any one kernel so that a kernel file imports only helpers, never
 * another kernel.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { type Binding, bindingBytes, type BufferRange, type Dispatch, type Gpu } from '../gpu.ts';
import { SUBGROUPS_SUFFIX } from '../shaders.ts';
import { linearGroups } from '../types.ts';

export { bindingBytes };

/** Every size a kernel writes into its uniform is a positive integer (0 or NaN would dispatch nothing or garbage). */
export function checkDims(what: string, dims: Record<string, number>): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isInteger(v) || v < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: ${name} must be a positive integer, got ${v}`, {
        ...dims,
      });
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

/**
 * How a kernel reduces across invocations (docs/KERNELS.md, "Subgroups"): with subgroup operations, or
 * without them (a tree in workgroup memory, or one invocation walking a whole row).
 */
export type Reduction = 'subgroup' | 'workgroup';

/** The reduction a kernel plans: `forced` if given (tests run both), else the Gpu's (`gpu.subgroups`). */
export function chooseReduction(gpu: Gpu, forced?: Reduction): Reduction {
  if (forced === 'subgroup' && !gpu.subgroups) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the subgroup reductions need the 'subgroups' feature, which this Gpu does not use (${gpu.info.description}: the adapter lacks it, or the Gpu was acquired with subgroups: false); plan with reduction 'workgroup' or leave it unset`,
      { adapter: gpu.info.description },
    );
  }
  return forced ?? (gpu.subgroups ? 'subgroup' : 'workgroup');
}

/**
 * The variant of a kernel whose workgroup version runs one invocation per row (layer norm, softmax, row mean and
 * max): its subgroup version gives each row a workgroup, which a GPU wants (rows spread over every multiprocessor)
 * and a CPU adapter does not: there a barrier switches through every invocation of the workgroup, and one
 * invocation per row took 2.6-9.5× less CPU time on SwiftShader at 1,024 rows of 768 (docs/KERNELS.md,
 * "Subgroups"). So a fallback adapter keeps them per row unless `forced`; by adapter kind, the same on every rank.
 */
export function chooseRowReduction(gpu: Gpu, forced?: Reduction): Reduction {
  if (forced) return chooseReduction(gpu, forced);
  return gpu.subgroups && !gpu.info.isFallbackAdapter ? 'subgroup' : 'workgroup';
}

/**
 * The shader key, entry point and grid of a per-row entry (`chooseRowReduction`): the workgroup
 * version's `entry`, an invocation per row; or the subgroup version's `${entry}_rows` in
 * `shader+subgroups`, a workgroup per row.
 */
export function rowEntry(gpu: Gpu, shader: string, entry: string, rows: number, forced?: Reduction) {
  return chooseRowReduction(gpu, forced) === 'subgroup'
    ? { key: reductionShader(shader, 'subgroup'), entry: `${entry}_rows`, groups: linearGroups(rows, 1) }
    : { key: shader, entry, groups: linearGroups(rows, 64) };
}

/** The shader key a reduction compiles: `key`, or `key+subgroups` (its parts' subgroup flavours; shaders.ts). */
export function reductionShader(key: string, reduction: Reduction): string {
  return reduction === 'subgroup' ? key + SUBGROUPS_SUFFIX : key;
}

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
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${label}: ${x}x${y}x${z} workgroups exceed ${MAX_GROUPS_PER_DIM} per dimension; split the work`,
      { workgroups },
    );
  }
  for (const [i, b] of bindings) gpu.checkBinding(label, i, b);
  const bindGroup = gpu.device.createBindGroup({
    label,
    layout: pipeline.getBindGroupLayout(0),
    entries: bindings.map(([binding, b]) => ({ binding, resource: 'buffer' in b ? b : { buffer: b } })),
  });
  const boundBytes = bindings.reduce((sum, [, b]) => sum + bindingBytes(b), 0);
  return { label, pipeline, bindGroup, workgroups: [x, y, z], boundBytes };
}

/** Storage binding offsets must be multiples of 256 bytes (WebGPU's largest minStorageBufferOffsetAlignment): 64 words. */
const OFFSET_ALIGN_WORDS = 64;

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** Rows `[start, start + count)` of an operand that one dispatch binds. */
export interface RowSlice {
  start: number;
  count: number;
}

/**
 * Splits `rows` rows of `rowWords` words into slices that each bind at most
 * `gpu.maxBindingBytes` and start on a 256-byte boundary (relative to the
 * operand's own start, which the caller's binding already aligns): one slice
 * when the whole operand fits. The slices depend only on the shape and the
 * limit, so a plan makes them once. `what` names the operand in the refusal
 * when a single aligned group of rows is already past the limit.
 * `widestRowWords`: the words per row of the widest binding sliced alongside
 * (a kernel's per-chunk partials), when more than `rowWords`.
 */
export function rowSlices(
  gpu: Pick<Gpu, 'maxBindingBytes'>,
  rows: number,
  rowWords: number,
  what: string,
  widestRowWords = rowWords,
): RowSlice[] {
  const maxRows = Math.floor(gpu.maxBindingBytes / (widestRowWords * 4));
  if (rows <= maxRows) return [{ start: 0, count: rows }];
  const step = OFFSET_ALIGN_WORDS / gcd(rowWords, OFFSET_ALIGN_WORDS);
  const perSlice = Math.floor(maxRows / step) * step;
  if (perSlice < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: ${step} row(s) of ${widestRowWords * 4} bytes (the fewest that keep a slice 256-byte aligned) are more than one binding may hold (${gpu.maxBindingBytes} bytes); make that dimension smaller`,
      { what, rowWords, step, max: gpu.maxBindingBytes },
    );
  }
  const slices: RowSlice[] = [];
  for (let start = 0; start < rows; start += perSlice) slices.push({ start, count: Math.min(perSlice, rows - start) });
  return slices;
}

/** Words `[startWords, startWords + words)` of a binding, as a range of its buffer. */
export function subRange(b: Binding, startWords: number, words: number): BufferRange {
  const buffer = 'buffer' in b ? b.buffer : b;
  const offset = ('buffer' in b ? (b.offset ?? 0) : 0) + startWords * 4;
  return { buffer, offset, size: words * 4 };
}
