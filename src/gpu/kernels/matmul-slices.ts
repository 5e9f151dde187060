/**
 * Matmuls with an operand bigger than one binding (`gpu.maxBindingBytes`):
 * a vocabulary-sized weight, as GPT-2's head [50257, 768] (154 MB against
 * lavapipe's 128 MiB), in any of the products a layer plans with it.
 *
 * The product is split along one axis into slices whose bindings all fit,
 * each slice a dispatch of the workgroup-memory kernel (matmul.wgsl, the one
 * that takes strides) over ranges of the whole operands:
 *   - rows of C (M): when C is too big, or A stored M×K (dW = dyᵀ·x, and h·W);
 *   - columns of C (N): when B is stored N×K (the head's forward h·Wᵀ), C's
 *     columns addressed in place through its row stride;
 *   - K: when B is stored K×N or A stored K×M (dx = dy·W): each slice's
 *     partial product goes to scratch and the slices are summed in order
 *     (reduce-rows.ts), like the split over K that planMatmulSteps makes.
 * Slices are multiples of 64 rows or columns, so every binding offset is a
 * multiple of 256 bytes. Along M and N every entry of C is computed as the
 * unsliced tiled kernel computes it: the same bits. Along K the order of the
 * sum is that of the split over K when the unsliced plan splits K too (slices
 * are whole numbers of its K chunks); otherwise it is a split of its own.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Binding, Dispatch, Gpu } from '../gpu.ts';
import { type RowSlice, subRange } from './common.ts';
import { matmulSplitK, type MatmulOptions, planMatmul, stridedMatmulDispatch, type Strides } from './matmul.ts';
import { alignWords, planColumnSum, type Scratch } from './reduce-rows.ts';

/** Slices are whole multiples of this many rows or columns: 256-byte offsets whatever the strides. */
const SLICE_UNIT = 64;

type Axis = 'm' | 'n' | 'k';

function operandWords(o: MatmulOptions): { a: number; b: number; c: number } {
  return { a: o.m * o.k, b: o.k * o.n, c: o.m * o.n };
}

/** Whether some operand of this product is bigger than one binding of `gpu`. */
export function tooBigToBind(gpu: Pick<Gpu, 'maxBindingBytes'>, o: MatmulOptions): boolean {
  const w = operandWords(o);
  return Math.max(w.a, w.b, w.c) * 4 > gpu.maxBindingBytes;
}

/** C = op(A)·op(B) in one dispatch when every operand fits one binding, else in slices (`planMatmulSliced`, no split over K of its own). */
export function planMatmulAnySize(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions, scratch: Scratch): Dispatch[] {
  return tooBigToBind(gpu, o) ? planMatmulSliced(gpu, a, b, c, o, scratch, false) : [planMatmul(gpu, a, b, c, o)];
}

function chooseAxis(o: MatmulOptions, maxWords: number): Axis {
  const w = operandWords(o);
  if (w.c > maxWords || (w.a > maxWords && !o.transA)) return 'm';
  if (w.b > maxWords && o.transB) return 'n';
  return 'k';
}

/** Words per row (M), column (N) or k (K) of the operands that slicing along `axis` shrinks. */
function wordsPerUnit(axis: Axis, o: MatmulOptions): number {
  if (axis === 'm') return Math.max(o.n, o.transA ? 0 : o.k);
  if (axis === 'n') return o.k;
  return Math.max(o.transA ? o.m : 0, o.transB ? 0 : o.n);
}

function slicesOf(total: number, per: number): RowSlice[] {
  const out: RowSlice[] = [];
  for (let start = 0; start < total; start += per) out.push({ start, count: Math.min(per, total - start) });
  return out;
}

/**
 * The sliced plan (see the file's comment). `splitK`: keep the split over K that
 * planMatmulSteps would make for this shape on the tiled kernel.
 */
export function planMatmulSliced(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions, scratch: Scratch, splitK: boolean): Dispatch[] {
  const maxWords = Math.floor(gpu.maxBindingBytes / 4);
  const axis = chooseAxis(o, maxWords);
  const tiled = { ...o, variant: 'tiled' as const };
  const chunk = splitK ? matmulSplitK(gpu, tiled) : { slices: 1, kc: o.k };
  const step = axis === 'k' && chunk.slices > 1 ? chunk.kc : SLICE_UNIT;
  const per = Math.floor(maxWords / wordsPerUnit(axis, o) / step) * step;
  if (per < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul ${o.m}×${o.k}·${o.k}×${o.n}: ${step} ${axis === 'm' ? 'rows' : axis === 'n' ? 'columns' : 'steps of K'} of its operands are already more than one binding (${gpu.maxBindingBytes} bytes); make the layer smaller`,
      { shape: { m: o.m, n: o.n, k: o.k }, max: gpu.maxBindingBytes },
    );
  }
  const total = axis === 'm' ? o.m : axis === 'n' ? o.n : o.k;
  const slices = slicesOf(total, per);
  if (axis === 'm') return slices.flatMap((s) => rowSlice(gpu, a, b, c, tiled, s, chunk, scratch));
  if (axis === 'n') return slices.map((s) => columnSlice(gpu, a, b, c, tiled, s));
  return kSlices(gpu, a, b, c, tiled, slices, chunk.slices > 1 ? chunk.kc : per, scratch);
}

/** Rows [m0, m0 + count) of C, with the unsliced plan's split over K when it has one. */
function rowSlice(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions, s: RowSlice, chunk: { slices: number; kc: number }, scratch: Scratch): Dispatch[] {
  const shape = { ...o, m: s.count };
  const aPart = o.transA ? subRange(a, s.start, (o.k - 1) * o.m + s.count) : subRange(a, s.start * o.k, s.count * o.k);
  const cPart = subRange(c, s.start * o.n, s.count * o.n);
  const strides: Strides = { lda: o.transA ? o.m : o.k, ldb: o.transB ? o.k : o.n, ldc: o.n, zs: alignWords(s.count * o.n) };
  if (chunk.slices === 1) return [stridedMatmulDispatch(gpu, aPart, b, cPart, shape, 1, o.k, strides)];
  const partials = scratch(chunk.slices * strides.zs, 'matmul-split-k');
  return [
    stridedMatmulDispatch(gpu, aPart, b, partials, shape, chunk.slices, chunk.kc, strides),
    ...planColumnSum(gpu, partials, cPart, { rows: chunk.slices, cols: s.count * o.n, stride: strides.zs }, scratch),
  ];
}

/** Columns [n0, n0 + count) of C (B stored N×K: its rows), written in place through C's row stride. */
function columnSlice(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions, s: RowSlice): Dispatch {
  const shape = { ...o, n: s.count, bias: o.bias ? subRange(o.bias, s.start, s.count) : undefined };
  const strides: Strides = { lda: o.transA ? o.m : o.k, ldb: o.k, ldc: o.n, zs: 0 };
  return stridedMatmulDispatch(gpu, a, subRange(b, s.start * o.k, s.count * o.k), subRange(c, s.start, (o.m - 1) * o.n + s.count), shape, 1, o.k, strides);
}

/** Slices of K, each in chunks of `kc`, their partial products summed in order into C. */
function kSlices(gpu: Gpu, a: Binding, b: Binding, c: Binding, o: MatmulOptions, slices: RowSlice[], kc: number, scratch: Scratch): Dispatch[] {
  if (o.bias || o.relu) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `matmul ${o.m}×${o.k}·${o.k}×${o.n}: an operand bigger than one binding along K cannot take a fused bias or ReLU; plan them apart`, { shape: { m: o.m, n: o.n, k: o.k } });
  }
  const zs = alignWords(o.m * o.n);
  const chunks = slices.reduce((n, s) => n + Math.ceil(s.count / kc), 0);
  const partials = scratch(chunks * zs, 'matmul-k-slices');
  const strides: Strides = { lda: o.transA ? o.m : o.k, ldb: o.transB ? o.k : o.n, ldc: o.n, zs };
  let z = 0;
  const steps = slices.map((s) => {
    const here = Math.ceil(s.count / kc);
    const aPart = o.transA ? subRange(a, s.start * o.m, s.count * o.m) : subRange(a, s.start, (o.m - 1) * o.k + s.count);
    const bPart = o.transB ? subRange(b, s.start, (o.n - 1) * o.k + s.count) : subRange(b, s.start * o.n, s.count * o.n);
    const d = stridedMatmulDispatch(gpu, aPart, bPart, subRange(partials, z * zs, here * zs), { ...o, k: s.count }, here, kc, strides);
    z += here;
    return d;
  });
  return [...steps, ...planColumnSum(gpu, partials, c, { rows: chunks, cols: o.m * o.n, stride: zs }, scratch)];
}
