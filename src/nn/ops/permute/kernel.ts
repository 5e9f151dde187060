/**
 * Transpose (any permutation of up to 4 dimensions), slice and concat along
 * an axis, forward and backward, all as one strided copy (shaders/strided.wgsl).
 * Reshape needs no kernel: the data is contiguous either way.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu, type UniformField } from '../../../gpu/gpu.ts';
import { sizeOf } from '../broadcast/kernel.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('strided', { shader: 'strided', entryPoints: ['copy', 'fill'] });

const RANK = 4;

function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

function checkRank(what: string, shape: readonly number[]): void {
  if (shape.length < 1 || shape.length > RANK) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: shape [${shape.join(', ')}] must have 1 to ${RANK} dimensions`,
      { shape: [...shape] },
    );
  }
  checkDims(what, Object.fromEntries(shape.map((d, i) => [`dim${i}`, d])));
}

/** One strided copy over `shape`: dst[dstOffset + c·dstStride] (=|+=) src[srcOffset + c·srcStride]. */
function planCopy(
  gpu: Gpu,
  what: string,
  shape: number[],
  src: Binding,
  srcStride: number[],
  srcOffset: number,
  dst: Binding,
  dstStride: number[],
  dstOffset: number,
  accumulate: boolean,
): Dispatch {
  const pad = RANK - shape.length;
  const p = (v: number[], fill: number) => [...new Array<number>(pad).fill(fill), ...v];
  const n = sizeOf(shape);
  const fields = [...p(shape, 1), ...p(srcStride, 0), ...p(dstStride, 0), n, srcOffset, dstOffset].map(
    (v) => ['u32', v] as UniformField,
  );
  fields.push(['f32', 0]);
  return planEntry(
    gpu,
    'strided',
    'copy',
    [
      [0, gpu.uniform(fields, `${what}-dims`)],
      [1, src],
      [2, dst],
    ],
    linearGroups(n, 256),
    accumulateConstant(accumulate),
  );
}

/** dst[offset .. offset + n) = value. */
export function planFill(gpu: Gpu, dst: Binding, n: number, value = 0, offset = 0): Dispatch {
  checkDims('fill', { n });
  checkBindings('fill', { dst: [dst, offset + n] }, { n, offset });
  const fields = [...new Array<number>(12).fill(0), n, 0, offset].map((v) => ['u32', v] as UniformField);
  fields.push(['f32', value]);
  return planEntry(
    gpu,
    'strided',
    'fill',
    [
      [0, gpu.uniform(fields, 'fill-dims')],
      [2, dst],
    ],
    linearGroups(n, 256),
  );
}

/** The shape of x [shape] permuted by `perm` (out dim i = in dim perm[i]). */
export function permutedShape(shape: readonly number[], perm: readonly number[]): number[] {
  const sorted = [...perm].sort((a, b) => a - b);
  if (perm.length !== shape.length || sorted.some((d, i) => d !== i)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `transpose: [${perm.join(', ')}] is not a permutation of the ${shape.length} dimensions of [${shape.join(', ')}]`,
      { shape: [...shape], perm: [...perm] },
    );
  }
  return perm.map((d) => shape[d]);
}

/**
 * out = x.permute(perm), contiguous. Its backward is the inverse permutation
 * (`inversePermutation`) applied to dy, with `accumulate` to add into dx.
 */
export function planTranspose(
  gpu: Gpu,
  x: Binding,
  shape: readonly number[],
  perm: readonly number[],
  out: Binding,
  accumulate = false,
): Dispatch {
  checkRank('transpose', shape);
  const outShape = permutedShape(shape, perm);
  checkBindings(
    'transpose',
    { x: [x, sizeOf(shape)], out: [out, sizeOf(shape)] },
    { shape: [...shape], perm: [...perm] },
  );
  const inStrides = stridesOf(shape);
  return planCopy(
    gpu,
    'transpose',
    outShape,
    x,
    perm.map((d) => inStrides[d]),
    0,
    out,
    stridesOf(outShape),
    0,
    accumulate,
  );
}

export function inversePermutation(perm: readonly number[]): number[] {
  const inv = new Array<number>(perm.length);
  perm.forEach((d, i) => (inv[d] = i));
  return inv;
}

function checkWindow(what: string, shape: readonly number[], axis: number, start: number, length: number): void {
  checkRank(what, shape);
  if (
    !Number.isInteger(axis) ||
    axis < 0 ||
    axis >= shape.length ||
    !Number.isInteger(start) ||
    !Number.isInteger(length) ||
    start < 0 ||
    length < 1 ||
    start + length > shape[axis]
  ) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: window [${start}, ${start + length}) on axis ${axis} does not fit shape [${shape.join(', ')}]`,
      { shape: [...shape], axis, start, length },
    );
  }
}

/**
 * Copies between a whole tensor `part` and the window [start, start+length)
 * along `axis` of `whole` (shape `wholeShape`). toWindow false: part = window
 * (slice forward, concat backward); toWindow true: window (=|+=) part (slice
 * backward after a fill, concat forward).
 */
export function planWindowCopy(
  gpu: Gpu,
  whole: Binding,
  wholeShape: readonly number[],
  axis: number,
  start: number,
  length: number,
  part: Binding,
  toWindow: boolean,
  accumulate = false,
): Dispatch {
  const what = toWindow ? 'window write' : 'slice';
  checkWindow(what, wholeShape, axis, start, length);
  const partShape = wholeShape.map((d, i) => (i === axis ? length : d));
  checkBindings(
    what,
    { whole: [whole, sizeOf(wholeShape)], part: [part, sizeOf(partShape)] },
    { shape: [...wholeShape], axis, start, length },
  );
  const wholeStrides = stridesOf(wholeShape);
  const offset = start * wholeStrides[axis];
  if (toWindow)
    return planCopy(gpu, what, partShape, part, stridesOf(partShape), 0, whole, wholeStrides, offset, accumulate);
  return planCopy(gpu, what, partShape, whole, wholeStrides, offset, part, stridesOf(partShape), 0, accumulate);
}

/** out = concat(parts, axis): one window write per part. Backward: one slice per part (planWindowCopy with toWindow false). */
export function planConcat(
  gpu: Gpu,
  parts: { buffer: Binding; shape: readonly number[] }[],
  axis: number,
  out: Binding,
): Dispatch[] {
  if (parts.length === 0) throw new RingtrainError(ErrorCode.InvalidArgument, 'concat: no tensors given');
  const first = parts[0].shape;
  for (const p of parts) {
    if (p.shape.length !== first.length || p.shape.some((d, i) => i !== axis && d !== first[i])) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `concat on axis ${axis}: shapes [${first.join(', ')}] and [${p.shape.join(', ')}] differ off that axis`,
        { axis, shapes: parts.map((q) => [...q.shape]) },
      );
    }
  }
  const outShape = first.map((d, i) => (i === axis ? parts.reduce((s, p) => s + p.shape[axis], 0) : d));
  let start = 0;
  return parts.map((p) => {
    const d = planWindowCopy(gpu, out, outShape, axis, start, p.shape[axis], p.buffer, true);
    start += p.shape[axis];
    return d;
  });
}
