/**
 * The output head fused with cross-entropy, planned in chunks of rows so that the logits
 * [rows × classes] and their gradient never exist whole (see index.ts for the op, and
 * shaders/linear_cross_entropy.wgsl for the per-row passes).
 *
 * Forward, per chunk of R rows: logits = h·Wᵀ + b into one chunk buffer, then `stats` (each row's
 * max, Σ exp and [loss, counted, correct]); after the last chunk the loss terms are summed over every
 * row in a fixed order (reduce_rows) and cross_entropy.wgsl's `total` makes the mean.
 * Backward, per chunk, in the same order: the logits again (one more h·Wᵀ instead of keeping them),
 * `grad` in place (dlogits), dh = dlogits·W for the chunk's rows, dW += dlogitsᵀ·h (the first chunk
 * writes dW, the others a chunk product that is added in), db += Σ_rows dlogits. Every sum runs in
 * an order fixed by the shapes: no float atomics, the same bits on every run.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type BufferRange, type Gpu } from '../../../gpu/gpu.ts';
import { chooseReduction, planEntry, type Reduction, reductionShader, subRange } from '../../../gpu/kernels/common.ts';
import { planAdd } from '../../../gpu/kernels/elementwise.ts';
import { planMatmulAnySize, planMatmulSteps } from '../../../gpu/kernels/matmul-slices.ts';
import { ALIGN_WORDS, planColumnSum, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';
import type { Step } from '../../op.ts';
import type { HeadShape } from './reference.ts';

defineKernel('linearCrossEntropy', { shader: 'linear_cross_entropy', entryPoints: ['stats', 'grad'] });
defineKernel('linearCrossEntropySubgroups', {
  shader: 'linear_cross_entropy+subgroups',
  entryPoints: ['stats'],
  requires: 'subgroups',
});

/**
 * The most bytes one chunk of logits takes: WebGPU's default (and smallest allowed)
 * maxStorageBufferBindingSize, so the chunk, which the row passes bind whole, fits one binding on
 * every adapter, and the chunk size depends on the vocabulary alone: the same on every rank.
 * Bigger chunks would save no work (each chunk's matmuls already have hundreds of rows at GPT-2's
 * vocabulary) and only cost memory.
 */
export const CHUNK_BYTES = 128 * 1024 * 1024;

/**
 * Rows per chunk: as many as fit CHUNK_BYTES (or the Gpu's binding limit, when a test sets a lower
 * one) in multiples of 64, so every chunk's ranges start on 256-byte boundaries; all the rows when
 * they fit one chunk. `most` (the op's `chunkRows`) caps it further.
 */
export function chunkRows(gpu: Pick<Gpu, 'maxBindingBytes'>, s: HeadShape, most = Infinity): number {
  const bytes = Math.min(CHUNK_BYTES, gpu.maxBindingBytes);
  const fit = Math.min(Math.floor(bytes / (s.classes * 4)), most);
  if (fit >= s.rows) return s.rows;
  const rows = Math.floor(fit / ALIGN_WORDS) * ALIGN_WORDS;
  if (rows < ALIGN_WORDS) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `linearCrossEntropy: ${ALIGN_WORDS} rows of ${s.classes} logits (${ALIGN_WORDS * s.classes * 4} bytes) do not fit one chunk of ${bytes} bytes${most < Infinity ? ` or chunkRows ${most}` : ''}; use a smaller vocabulary, or the unfused linear + crossEntropy`,
      { classes: s.classes, rows: s.rows, bytes, chunkRows: most },
    );
  }
  return rows;
}

/** Whether a head of this shape is cheaper fused: when its logits would not fit one chunk (below that, chunking saves no memory and costs a matmul). */
export function fusedHeadPays(rows: number, classes: number): boolean {
  return rows * classes * 4 > CHUNK_BYTES;
}

export interface HeadBuffers {
  h: Binding;
  w: Binding;
  bias: Binding | null;
  /** i32 per row: a class, or −1 (ignored). */
  targets: Binding;
  /** [rows × 2], written forward, read backward. */
  norm: Binding;
  /** [mean loss, correct, count] (4 words). */
  result: GPUBuffer;
}

/** One chunk: its first row and row count. */
interface Chunk {
  start: number;
  rows: number;
}

function chunksOf(rows: number, per: number): Chunk[] {
  const out: Chunk[] = [];
  for (let start = 0; start < rows; start += per) out.push({ start, rows: Math.min(per, rows - start) });
  return out;
}

/** The chunk's logits = h·Wᵀ (+ b) into `logits`, and the uniform its row passes take. */
function chunkLogits(gpu: Gpu, b: HeadBuffers, s: HeadShape, c: Chunk, logits: Binding, scratch: Scratch) {
  const out = subRange(logits, 0, c.rows * s.classes);
  const steps = planMatmulAnySize(
    gpu,
    subRange(b.h, c.start * s.width, c.rows * s.width),
    b.w,
    out,
    { m: c.rows, n: s.classes, k: s.width, transB: true, bias: b.bias ?? undefined },
    scratch,
  );
  const dims = gpu.uniform(
    [
      ['u32', c.rows],
      ['u32', s.classes],
      ['u32', 0],
      ['u32', 0],
    ],
    'linear-xent-dims',
  );
  return {
    out,
    steps,
    dims,
    targets: subRange(b.targets, c.start, c.rows),
    norm: subRange(b.norm, 2 * c.start, 2 * c.rows),
  };
}

/**
 * Forward: per chunk the logits and their row stats; then the sums over every row into
 * b.result = [mean loss, correct, count], and the loss copied to `loss`. `forced` picks the
 * reductions' variant (default: the Gpu's).
 */
export function planHeadForward(
  gpu: Gpu,
  b: HeadBuffers,
  s: HeadShape,
  per: number,
  loss: BufferRange,
  scratch: Scratch,
  forced?: Reduction,
): Step[] {
  const reduction = chooseReduction(gpu, forced);
  const logits = scratch(per * s.classes, 'chunk-logits');
  const rowStats = scratch(3 * s.rows, 'row-stats');
  const steps: Step[] = chunksOf(s.rows, per).flatMap((c) => {
    const l = chunkLogits(gpu, b, s, c, logits, scratch);
    const stats = planEntry(
      gpu,
      reductionShader('linear_cross_entropy', reduction),
      'stats',
      [
        [0, l.dims],
        [1, l.out],
        [2, l.targets],
        [3, l.norm],
        [4, subRange(rowStats, 3 * c.start, 3 * c.rows)],
      ],
      linearGroups(c.rows, 1),
    );
    return [...l.steps, stats];
  });
  const totals = gpu.uniform(
    [
      ['u32', s.rows],
      ['u32', s.classes],
      ['f32', 1],
      ['u32', 0],
    ],
    'linear-xent-total',
  );
  return [
    ...steps,
    ...planColumnSum(gpu, rowStats, b.result, { rows: s.rows, cols: 3, reduction }, scratch),
    planEntry(
      gpu,
      'cross_entropy',
      'total',
      [
        [0, totals],
        [5, b.result],
      ],
      [1],
    ),
    { copy: { src: { buffer: b.result, offset: 0, size: 4 }, dst: loss, bytes: 4 } },
  ];
}

export interface HeadGradients {
  /** ∂loss/∂(the op's output), one word. */
  upstream: Binding;
  dh: Binding | null;
  dw: Binding | null;
  db: Binding | null;
}

/** Backward: per chunk the logits again, dlogits in place, then the chunk's share of dh, dW and db. */
export function planHeadBackward(
  gpu: Gpu,
  b: HeadBuffers,
  g: HeadGradients,
  s: HeadShape,
  per: number,
  scratch: Scratch,
): Step[] {
  const logits = scratch(per * s.classes, 'chunk-logits');
  const chunks = chunksOf(s.rows, per);
  // The first chunk writes dW; the others write their product here and add it in, in chunk order.
  const dwPart = g.dw && chunks.length > 1 ? scratch(s.classes * s.width, 'dw-chunk') : null;
  return chunks.flatMap((c, i) => {
    const l = chunkLogits(gpu, b, s, c, logits, scratch);
    const grad = planEntry(
      gpu,
      'linear_cross_entropy',
      'grad',
      [
        [0, l.dims],
        [1, l.out],
        [2, l.targets],
        [3, l.norm],
        [5, b.result],
        [6, g.upstream],
      ],
      linearGroups(c.rows, 1),
    );
    const steps: Step[] = [...l.steps, grad];
    const h = subRange(b.h, c.start * s.width, c.rows * s.width);
    if (g.dh) {
      const dh = subRange(g.dh, c.start * s.width, c.rows * s.width);
      steps.push(...planMatmulAnySize(gpu, l.out, b.w, dh, { m: c.rows, n: s.width, k: s.classes }, scratch));
    }
    if (g.dw) {
      const into = i === 0 ? g.dw : dwPart!;
      steps.push(
        ...planMatmulSteps(gpu, l.out, h, into, { m: s.classes, n: s.width, k: c.rows, transA: true }, scratch),
      );
      if (i > 0) steps.push(...planAdd(gpu, dwPart!, g.dw, s.classes * s.width));
    }
    if (g.db)
      steps.push(...planColumnSum(gpu, l.out, g.db, { rows: c.rows, cols: s.classes, accumulate: i > 0 }, scratch));
    return steps;
  });
}
