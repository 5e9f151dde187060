/**
 * Elementwise add / subtract / multiply with NumPy broadcasting (up to 4
 * dimensions), scale, and the reduction that gives a broadcast input its
 * gradient. See shaders/broadcast.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu, type UniformField } from '../../../gpu/gpu.ts';
import { gpuScratch, planColumnSum, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('broadcast', { shader: 'broadcast', entryPoints: ['add', 'mul', 'scale', 'reduce'] });

/** Broadcast coordinates one invocation of a split `reduce` sums (about): the rest go to other slices. */
const REDUCE_CHUNK = 64;
const REDUCE_MAX_PARTIAL = 1 << 22;

export const MAX_BROADCAST_DIMS = 4;

export function sizeOf(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The broadcast result shape of `a` and `b` (right-aligned), or InvalidArgument naming both. */
export function broadcastShape(a: readonly number[], b: readonly number[], what = 'broadcast'): number[] {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: shapes [${a.join(', ')}] and [${b.join(', ')}] do not broadcast (dimension ${i}: ${da} vs ${db}); make them equal or 1`,
        { a: [...a], b: [...b] },
      );
    }
    out.push(Math.max(da, db));
  }
  return out;
}

/** `shape` left-padded with 1s to 4 dimensions. */
function pad4(shape: readonly number[], what: string): number[] {
  if (shape.length > MAX_BROADCAST_DIMS) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: shape [${shape.join(', ')}] has ${shape.length} dimensions; broadcasting supports at most ${MAX_BROADCAST_DIMS} (reshape first)`,
      { shape: [...shape] },
    );
  }
  checkDims(what, Object.fromEntries(shape.map((d, i) => [`dim${i}`, d])));
  return [...new Array<number>(MAX_BROADCAST_DIMS - shape.length).fill(1), ...shape];
}

/** Row-major strides of `input` read at coordinates of `out` (both padded to 4): 0 where input is broadcast. */
function broadcastStrides(input: readonly number[], out: readonly number[], what: string): number[] {
  const s = pad4(input, what);
  pad4(out, what);
  const strides = [0, 0, 0, 0];
  let step = 1;
  for (let d = MAX_BROADCAST_DIMS - 1; d >= 0; d--) {
    strides[d] = s[d] === 1 ? 0 : step;
    step *= s[d];
  }
  return strides;
}

const u32s = (v: number[]): UniformField[] => v.map((x) => ['u32', x] as UniformField);

export interface BinaryOptions {
  /** add: out = a + alpha · b (−1 subtracts). Default 1. */
  alpha?: number;
  accumulate?: boolean;
}

/** out = a + alpha·b or a · b, broadcasting; out is contiguous with shape broadcastShape(aShape, bShape). */
export function planBroadcastBinary(
  gpu: Gpu,
  op: 'add' | 'mul',
  a: Binding,
  aShape: readonly number[],
  b: Binding,
  bShape: readonly number[],
  out: Binding,
  opts: BinaryOptions = {},
): Dispatch {
  const shape = broadcastShape(aShape, bShape, op);
  const n = sizeOf(shape);
  checkBindings(
    op,
    { a: [a, sizeOf(aShape)], b: [b, sizeOf(bShape)], out: [out, n] },
    { aShape: [...aShape], bShape: [...bShape] },
  );
  const fields = [
    ...u32s(pad4(shape, op)),
    ...u32s(broadcastStrides(aShape, shape, op)),
    ...u32s(broadcastStrides(bShape, shape, op)),
    ['u32', n],
    ['f32', opts.alpha ?? 1],
    ['u32', 0],
    ['u32', 0],
  ] as UniformField[];
  return planEntry(
    gpu,
    'broadcast',
    op,
    [
      [0, gpu.uniform(fields, `${op}-dims`)],
      [1, a],
      [2, b],
      [3, out],
    ],
    linearGroups(n, 256),
    accumulateConstant(opts.accumulate),
  );
}

/** out (=, or +=) alpha · x over n elements. */
export function planScaleTo(
  gpu: Gpu,
  alpha: number,
  x: Binding,
  out: Binding,
  n: number,
  accumulate = false,
): Dispatch {
  checkDims('scale', { n });
  checkBindings('scale', { x: [x, n], out: [out, n] }, { n });
  const fields = [
    ...u32s(new Array<number>(12).fill(1)),
    ['u32', n],
    ['f32', alpha],
    ['u32', 0],
    ['u32', 0],
  ] as UniformField[];
  return planEntry(
    gpu,
    'broadcast',
    'scale',
    [
      [0, gpu.uniform(fields, 'scale-dims')],
      [1, x],
      [3, out],
    ],
    linearGroups(n, 256),
    accumulateConstant(accumulate),
  );
}

export interface ReduceOptions {
  /** Multiply dy by this (the other input of a product, broadcast to dy's shape) before summing. */
  other?: { buffer: Binding; shape: readonly number[] };
  alpha?: number;
  accumulate?: boolean;
  /** Where the partial sums of a split reduction live (default: new buffers). */
  scratch?: Scratch;
}

/**
 * The gradient of an input of shape `targetShape` that was broadcast to
 * `shape`: dtarget (=, or +=) alpha · Σ over the broadcast dimensions of dy
 * (times `other` for a product).
 */
export function planBroadcastReduce(
  gpu: Gpu,
  dy: Binding,
  shape: readonly number[],
  dtarget: Binding,
  targetShape: readonly number[],
  opts: ReduceOptions = {},
): Dispatch[] {
  const joined = broadcastShape(shape, targetShape, 'broadcast gradient');
  if (joined.length !== shape.length || joined.some((d, i) => d !== shape[i])) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `broadcast gradient: an input of shape [${targetShape.join(', ')}] cannot have been broadcast to [${shape.join(', ')}]`,
      { shape: [...shape], targetShape: [...targetShape] },
    );
  }
  const n = sizeOf(targetShape);
  const other = opts.other;
  checkBindings(
    'broadcast gradient',
    {
      dy: [dy, sizeOf(shape)],
      dtarget: [dtarget, n],
      ...(other ? { other: [other.buffer, sizeOf(other.shape)] } : {}),
    },
    { shape: [...shape], targetShape: [...targetShape] },
  );
  const fields = [
    ...u32s(pad4(shape, 'broadcast gradient')),
    ...u32s(pad4(targetShape, 'broadcast gradient')),
    ...u32s(other ? broadcastStrides(other.shape, shape, 'broadcast gradient') : [0, 0, 0, 0]),
    ['u32', n],
    ['f32', opts.alpha ?? 1],
  ] as UniformField[];
  // Split the outermost broadcast dimension (a batch) into slices of partial sums when it is long.
  const s4 = pad4(shape, 'broadcast gradient');
  const t4 = pad4(targetShape, 'broadcast gradient');
  const split = s4.findIndex((d, i) => t4[i] === 1 && d > 1);
  let slices = 1;
  let chunk = 0;
  if (split >= 0) {
    const others = sizeOf(shape) / n / s4[split];
    chunk = Math.max(1, Math.ceil(REDUCE_CHUNK / others));
    slices = Math.min(Math.ceil(s4[split] / chunk), Math.max(1, Math.floor(REDUCE_MAX_PARTIAL / n)));
    chunk = Math.ceil(s4[split] / slices);
    slices = Math.ceil(s4[split] / chunk);
  }
  if (slices === 1) chunk = 0;
  fields.push(['u32', Math.max(split, 0)], ['u32', chunk]);
  const constants = { HAS_OTHER: other ? 1 : 0 };
  const [x, y] = linearGroups(n, 256);
  // `other` is bound either way: the shader names it (behind HAS_OTHER), so the pipeline's layout has it.
  const pass = (out: Binding, accumulate: boolean | undefined) =>
    planEntry(
      gpu,
      'broadcast',
      'reduce',
      [
        [4, gpu.uniform(fields, 'broadcast-reduce-dims')],
        [5, dy],
        [6, other?.buffer ?? gpu.dummy],
        [7, out],
      ],
      [x, y, slices],
      { ...accumulateConstant(accumulate), ...constants },
    );
  if (slices === 1) return [pass(dtarget, opts.accumulate)];
  const partials = (opts.scratch ?? gpuScratch(gpu))(slices * n, 'broadcast-reduce-partials');
  return [
    pass(partials, false),
    ...planColumnSum(gpu, partials, dtarget, { rows: slices, cols: n, accumulate: opts.accumulate }, opts.scratch),
  ];
}
