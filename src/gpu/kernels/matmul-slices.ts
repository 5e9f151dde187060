/**
 * Matmuls with an operand bigger than one binding (`gpu.maxBindingBytes`):
 * a vocabulary-sized weight, as GPT-2's head [50257, 768] (154 MB against
 * lavapipe's 128 MiB), in any of the products a layer plans with it.
 *
 * The product is split into parts whose bindings all fit, each part a
 * dispatch of the workgroup-memory kernel (matmul.wgsl, the one that takes
 * strides) over ranges of the whole operands. A part whose A, B or C is still
 * too big is split along the axis that shrinks it, and again until all fit:
 *   - rows of C (M): C too big, or A stored M×K (the activations at a big batch);
 *   - columns of C (N): B stored N×K (the head's forward h·Wᵀ), C's columns
 *     addressed in place through its row stride;
 *   - K, last: B stored K×N or A stored K×M (dx = dy·W, dW = dyᵀ·x): each
 *     slice's partial product goes to scratch and the slices are summed in
 *     order (reduce-rows.ts), like the split over K that planMatmulSteps makes.
 * A part that fits but does more than `gpu.maxDispatchMacs` multiply-adds is
 * cut along M (else N) the same way, so that no single dispatch runs for long.
 * Slices are multiples of 64 rows or columns, so every binding offset is a
 * multiple of 256 bytes. Along M and N every entry of C is computed as the
 * unsliced tiled kernel computes it: the same bits. Along K the order of the
 * sum is that of the split over K when the unsliced plan splits K too (slices
 * are whole numbers of its K chunks); otherwise it is a split of its own.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Binding, Dispatch, Gpu } from '../gpu.ts';
import { checkDims, type RowSlice, subRange } from './common.ts';
import {
  matmulSplitK,
  type MatmulOptions,
  planMatmul,
  planMatmulSplitK,
  stridedMatmulDispatch,
  type Strides,
} from './matmul.ts';
import { alignWords, gpuScratch, planColumnSum, type Scratch } from './reduce-rows.ts';

/** Slices are whole multiples of this many rows or columns: 256-byte offsets whatever the strides. */
const SLICE_UNIT = 64;

type Axis = 'm' | 'n' | 'k';
type Operand = 'a' | 'b' | 'c';

/** Whether some operand of this product is bigger than one binding of `gpu`. */
export function tooBigToBind(gpu: Pick<Gpu, 'maxBindingBytes'>, o: MatmulOptions): boolean {
  return Math.max(o.m * o.k, o.k * o.n, o.m * o.n) * 4 > gpu.maxBindingBytes;
}

/**
 * C = op(A)·op(B) as the ops plan it: `planMatmulSplitK` (matmul.ts: one dispatch, or K slices
 * summed in a fixed order) when every operand fits one binding, else in parts that keep its split over K.
 */
export function planMatmulSteps(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checkDims('matmul', { m: o.m, n: o.n, k: o.k });
  if (tooBigToBind(gpu, o)) return planMatmulSliced(gpu, a, b, c, o, scratch, true);
  return planMatmulSplitK(gpu, a, b, c, o, scratch);
}

/** C = op(A)·op(B) in one dispatch when every operand fits one binding, else in parts (`planMatmulSliced`, no split over K of its own). */
export function planMatmulAnySize(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  scratch: Scratch,
): Dispatch[] {
  return tooBigToBind(gpu, o) ? planMatmulSliced(gpu, a, b, c, o, scratch, false) : [planMatmul(gpu, a, b, c, o)];
}

/** One part of the product: its sizes, word offsets into A, B, bias and `out`, and how `out` is laid out. */
interface Part {
  m: number;
  n: number;
  k: number;
  a: number;
  b: number;
  bias: number;
  c: number;
  out: Binding;
  ldc: number;
  /** K chunks this part's dispatch computes (grid z), `kc` each, `zs` words apart in `out`. */
  chunks: number;
  kc: number;
  zs: number;
}

/** What every part shares: the whole operands, their strides, the limit, and the split over K to keep. */
interface Whole {
  gpu: Gpu;
  o: MatmulOptions;
  a: Binding;
  b: Binding;
  lda: number;
  ldb: number;
  maxWords: number;
  /** K per chunk of the unsliced plan's split over K (0: none to keep). */
  kc: number;
  scratch: Scratch;
}

/** The axis along which each operand's range shrinks. */
function axisOf(o: MatmulOptions): Record<Operand, Axis> {
  return { a: o.transA ? 'k' : 'm', b: o.transB ? 'n' : 'k', c: 'm' };
}

/** Words each operand's range spans in a part: its contiguous extent plus a stride per further row. */
function extent(w: Whole, p: Part): Record<Operand, { width: number; stride: number; rows: number }> {
  const o = w.o;
  return {
    a: o.transA ? { width: p.m, stride: w.lda, rows: p.k } : { width: p.k, stride: w.lda, rows: p.m },
    b: o.transB ? { width: p.k, stride: w.ldb, rows: p.n } : { width: p.n, stride: w.ldb, rows: p.k },
    c: { width: p.n, stride: p.ldc, rows: p.m },
  };
}

const span = (e: { width: number; stride: number; rows: number }) => (e.rows - 1) * e.stride + e.width;

/**
 * The sliced plan (see the file's comment). `splitK`: keep the split over K that
 * planMatmulSteps would make for this shape on the tiled kernel.
 */
export function planMatmulSliced(
  gpu: Gpu,
  a: Binding,
  b: Binding,
  c: Binding,
  o: MatmulOptions,
  scratch: Scratch,
  splitK: boolean,
): Dispatch[] {
  const tiled = { ...o, variant: 'tiled' as const };
  const chunk = splitK ? matmulSplitK(gpu, tiled) : { slices: 1, kc: o.k };
  const whole: Whole = {
    gpu,
    o: tiled,
    a,
    b,
    lda: o.transA ? o.m : o.k,
    ldb: o.transB ? o.k : o.n,
    maxWords: Math.floor(gpu.maxBindingBytes / 4),
    kc: chunk.slices > 1 ? chunk.kc : 0,
    scratch,
  };
  return planPart(whole, {
    m: o.m,
    n: o.n,
    k: o.k,
    a: 0,
    b: 0,
    bias: 0,
    c: 0,
    out: c,
    ldc: o.n,
    chunks: 1,
    kc: o.k,
    zs: 0,
  });
}

function planPart(w: Whole, p: Part): Dispatch[] {
  const ext = extent(w, p);
  const over = (['a', 'b', 'c'] as const).filter((x) => span(ext[x]) > w.maxWords);
  if (over.length === 0) {
    const cut = workCut(w, p);
    return cut ? splitParts(w, p, cut.axis, cut.per) : leaf(w, p);
  }
  const axes = axisOf(w.o);
  // Rows and columns first: a split over K needs a sum afterwards.
  const axis = over.map((x) => axes[x]).find((x) => x !== 'k') ?? 'k';
  const shrinking = (['a', 'b', 'c'] as const).filter((x) => axes[x] === axis);
  const most = Math.min(...shrinking.map((x) => Math.floor((w.maxWords - ext[x].width) / ext[x].stride) + 1));
  // Whole chunks of the unsliced plan's split over K keep its bits; when not even one fits, 64 at a time.
  const unit = axis === 'k' && w.kc > 0 && most >= w.kc ? w.kc : SLICE_UNIT;
  const per = Math.floor(most / unit) * unit;
  const total = axis === 'm' ? p.m : axis === 'n' ? p.n : p.k;
  if (!(per >= unit)) {
    const x = over.find((y) => axes[y] === axis)!;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul ${w.o.m}×${w.o.k}·${w.o.k}×${w.o.n}: its operand ${x.toUpperCase()} (${span(ext[x]) * 4} bytes) cannot be sliced to fit one binding (${w.gpu.maxBindingBytes} bytes): ${unit} ${axis === 'k' ? 'steps of K' : axis === 'm' ? 'rows' : 'columns'} of it, ${ext[x].width} words each, already pass it`,
      { shape: { m: w.o.m, n: w.o.n, k: w.o.k }, operand: x, size: span(ext[x]) * 4, max: w.gpu.maxBindingBytes },
    );
  }
  if (axis === 'k') {
    const kc = unit === w.kc ? w.kc : per;
    const chunks = Math.ceil(p.k / per) * Math.ceil(per / kc);
    // The sum reads every slice's partial product through one binding: fewer rows of C at a time until it fits.
    const rows = Math.floor(w.maxWords / chunks / alignWords(p.n) / SLICE_UNIT) * SLICE_UNIT;
    if (rows < p.m && rows >= SLICE_UNIT) return splitParts(w, p, 'm', rows);
    const slices: RowSlice[] = [];
    for (let start = 0; start < total; start += per) slices.push({ start, count: Math.min(per, total - start) });
    return kSlices(w, p, slices, kc);
  }
  return splitParts(w, p, axis, per);
}

/**
 * Where a part that fits its bindings still does more than `gpu.maxDispatchMacs` multiply-adds: rows of
 * C, else columns, in whole multiples of 64, so each entry is computed as before (the same bits).
 * Columns only where the leaf makes no split over K of its own, which needs C's rows whole.
 */
function workCut(w: Whole, p: Part): { axis: 'm' | 'n'; per: number } | undefined {
  const macs = p.m * p.n * p.k;
  if (macs <= w.gpu.maxDispatchMacs) return undefined;
  const pieces = Math.ceil(macs / w.gpu.maxDispatchMacs);
  const per = (total: number) => Math.max(SLICE_UNIT, Math.ceil(total / pieces / SLICE_UNIT) * SLICE_UNIT);
  if (p.m >= 2 * SLICE_UNIT) return { axis: 'm', per: per(p.m) };
  const leafSplitsK = p.chunks === 1 && w.kc > 0 && p.k > w.kc && p.ldc === p.n;
  if (!leafSplitsK && p.n >= 2 * SLICE_UNIT) return { axis: 'n', per: per(p.n) };
  return undefined;
}

/** The part in slices of `per` rows (m) or columns (n) of C, each planned again. */
function splitParts(w: Whole, p: Part, axis: 'm' | 'n', per: number): Dispatch[] {
  const total = axis === 'm' ? p.m : p.n;
  const slices: RowSlice[] = [];
  for (let start = 0; start < total; start += per) slices.push({ start, count: Math.min(per, total - start) });
  const o = w.o;
  return slices.flatMap((s) =>
    planPart(
      w,
      axis === 'm'
        ? { ...p, m: s.count, a: p.a + (o.transA ? s.start : s.start * w.lda), c: p.c + s.start * p.ldc }
        : {
            ...p,
            n: s.count,
            b: p.b + (o.transB ? s.start * w.ldb : s.start),
            c: p.c + s.start,
            bias: p.bias + s.start,
          },
    ),
  );
}

/** Slices of K, in chunks of `kc`: partial products into scratch, then their sum in order into the part's C. */
function kSlices(w: Whole, p: Part, slices: RowSlice[], kc: number): Dispatch[] {
  if (w.o.bias || w.o.relu || p.ldc !== p.n || p.chunks > 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `matmul ${w.o.m}×${w.o.k}·${w.o.k}×${w.o.n}: its operands need a split over K here, which cannot take a fused bias or ReLU or write columns of C in place; make the layer smaller`,
      { shape: { m: w.o.m, n: w.o.n, k: w.o.k } },
    );
  }
  const zs = alignWords(p.m * p.n);
  const chunks = slices.reduce((n, s) => n + Math.ceil(s.count / kc), 0);
  const partials = w.scratch(chunks * zs, 'matmul-k-slices');
  let z = 0;
  const steps = slices.flatMap((s) => {
    const here = Math.ceil(s.count / kc);
    const part = {
      ...p,
      k: s.count,
      a: p.a + (w.o.transA ? s.start * w.lda : s.start),
      b: p.b + (w.o.transB ? s.start : s.start * w.ldb),
      out: partials,
      c: z * zs,
      chunks: here,
      kc,
      zs,
    };
    z += here;
    return planPart(w, part);
  });
  return [
    ...steps,
    ...planColumnSum(
      w.gpu,
      partials,
      subRange(p.out, p.c, p.m * p.n),
      { rows: chunks, cols: p.m * p.n, stride: zs },
      w.scratch,
    ),
  ];
}

/** One dispatch over the part's ranges; with the unsliced plan's split over K when it has one and the part's C is whole rows. */
function leaf(w: Whole, p: Part): Dispatch[] {
  const ext = extent(w, p);
  const o = { ...w.o, m: p.m, n: p.n, k: p.k, bias: w.o.bias ? subRange(w.o.bias, p.bias, p.n) : undefined };
  const a = subRange(w.a, p.a, span(ext.a));
  const b = subRange(w.b, p.b, span(ext.b));
  const strides = (zs: number): Strides => ({ lda: w.lda, ldb: w.ldb, ldc: p.ldc, zs });
  if (p.chunks === 1 && w.kc > 0 && p.k > w.kc && p.ldc === p.n) {
    const zs = alignWords(p.m * p.n);
    const slices = Math.ceil(p.k / w.kc);
    const partials = w.scratch(slices * zs, 'matmul-split-k');
    return [
      stridedMatmulDispatch(w.gpu, a, b, partials, o, slices, w.kc, strides(zs)),
      ...planColumnSum(
        w.gpu,
        partials,
        subRange(p.out, p.c, p.m * p.n),
        { rows: slices, cols: p.m * p.n, stride: zs },
        w.scratch,
      ),
    ];
  }
  const c = subRange(p.out, p.c, (p.chunks - 1) * p.zs + span(ext.c));
  return [stridedMatmulDispatch(w.gpu, a, b, c, o, p.chunks, p.kc, strides(p.zs))];
}
