/**
 * Deterministic sums over rows that spread over the whole GPU: a column sum
 * `dst[c] (=, or +=) scale · Σ_r src[r·stride + c]` planned as a tree of
 * fixed-size chunks of rows (shaders/reduce_rows.wgsl). Each level sums every
 * chunk of rows into one partial row, in parallel over chunks × columns, until
 * one row is left; the last level writes (or adds into) the destination.
 * The order of every addition is fixed by the shapes alone, so results are
 * bit-identical between runs and runtimes (no float atomics), and the
 * workgroup count grows with the rows.
 *
 * Kernels whose output is a sum over the batch (bias, layer-norm, embedding,
 * conv weight gradients, loss totals, split-K matmuls) write per-chunk
 * partials and finish with `planColumnSum`.
 */
import { linearGroups, type Binding, type BufferRange, type Dispatch, type Gpu } from '../gpu.ts';
import {
  accumulateConstant,
  checkDims,
  chooseReduction,
  planEntry,
  type Reduction,
  reductionShader,
} from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('reduceRows', { shader: 'reduce_rows', entryPoints: ['columns', 'tree'] });
// `columns` reduces nothing across invocations (each walks its column's rows): only `tree` has a subgroup version.
defineKernel('reduceRowsSubgroups', { shader: 'reduce_rows+subgroups', entryPoints: ['tree'], requires: 'subgroups' });

/** Rows one invocation of `columns` sums per level. */
export const COLUMN_CHUNK = 16;
/** Rows one workgroup of `tree` sums per level (64 invocations, one row each). */
export const TREE_CHUNK = 64;
/** Below this many columns a level runs as `tree` (one workgroup per chunk and column). */
const TREE_BELOW_COLS = 32;

/** Where a kernel's temporary buffers come from: `PlanContext.scratch` in the planner. */
export type Scratch = (words: number, label: string) => GPUBuffer;

/** A scratch allocator that makes a new (counted) buffer per call: for callers outside the planner. */
export function gpuScratch(gpu: Gpu): Scratch {
  return (words, label) => gpu.storage(words, label);
}

/** Storage binding offsets must be multiples of 256 bytes (minStorageBufferOffsetAlignment): 64 words. */
export const ALIGN_WORDS = 64;

export function alignWords(words: number): number {
  return Math.ceil(words / ALIGN_WORDS) * ALIGN_WORDS;
}

/** Splits one scratch buffer into ranges of the given word counts, each starting at a 256-byte boundary. */
export function scratchRanges(scratch: Scratch, words: number[], label: string): BufferRange[] {
  const total = words.reduce((s, w) => s + alignWords(w), 0);
  const buffer = scratch(total, label);
  let at = 0;
  return words.map((w) => {
    const r = { buffer, offset: at * 4, size: Math.max(1, w) * 4 };
    at += alignWords(w);
    return r;
  });
}

export interface ColumnSumShape {
  rows: number;
  cols: number;
  /** Words between the starts of two rows of src (default cols). */
  stride?: number;
  /** Word offset of dst[0] within the dst binding (a result slot). */
  dstOffset?: number;
  /** Multiplies the sum (a mean); applied once, on the last level. */
  scale?: number;
  /** Adds into dst instead of overwriting it. */
  accumulate?: boolean;
  /** Forces the `tree` levels' variant (default: the Gpu's, `gpu.subgroups`). */
  reduction?: Reduction;
}

/** The chunk size and entry point a level of `rows × cols` uses, and how many partial rows it leaves. */
export function columnSumLevel(
  rows: number,
  cols: number,
): { entry: 'columns' | 'tree'; chunk: number; chunks: number } {
  const tree = cols < TREE_BELOW_COLS;
  const chunk = tree ? TREE_CHUNK : COLUMN_CHUNK;
  return { entry: tree ? 'tree' : 'columns', chunk, chunks: Math.ceil(rows / chunk) };
}

/** Workgroups of one level (for the planner's own accounting and the tests). */
function levelGroups(entry: 'columns' | 'tree', chunks: number, cols: number): [number, number, number] {
  return entry === 'tree' ? linearGroups(chunks * cols, 1) : linearGroups(chunks * cols, 64);
}

/**
 * dst[dstOffset + c] (=, or += with `accumulate`) scale · Σ_r src[r·stride + c]
 * for c < cols: one dispatch per level of the tree (one when rows fit one chunk).
 */
export function planColumnSum(
  gpu: Gpu,
  src: Binding,
  dst: Binding,
  s: ColumnSumShape,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checkDims('columnSum', { rows: s.rows, cols: s.cols });
  const treeShader = reductionShader('reduce_rows', chooseReduction(gpu, s.reduction));
  const steps: Dispatch[] = [];
  let rows = s.rows;
  let stride = s.stride ?? s.cols;
  let from: Binding = src;
  for (;;) {
    const level = columnSumLevel(rows, s.cols);
    const last = level.chunks === 1;
    const to: Binding = last ? dst : scratch(level.chunks * s.cols, 'column-sum-partials');
    const dims = gpu.uniform(
      [
        ['u32', rows],
        ['u32', s.cols],
        ['u32', stride],
        ['u32', level.chunk],
        ['u32', last ? (s.dstOffset ?? 0) : 0],
        ['f32', last ? (s.scale ?? 1) : 1],
        ['u32', 0],
        ['u32', 0],
      ],
      'column-sum-dims',
    );
    steps.push(
      planEntry(
        gpu,
        level.entry === 'tree' ? treeShader : 'reduce_rows',
        level.entry,
        [
          [0, dims],
          [1, from],
          [2, to],
        ],
        levelGroups(level.entry, level.chunks, s.cols),
        accumulateConstant(last && s.accumulate),
      ),
    );
    if (last) return steps;
    from = to;
    rows = level.chunks;
    stride = s.cols;
  }
}

/** Σ of n values into dst[outIndex], times `scale`: the column sum of an n × 1 matrix. */
export function planSumTree(
  gpu: Gpu,
  x: Binding,
  dst: Binding,
  n: number,
  opts: { outIndex?: number; scale?: number; reduction?: Reduction } = {},
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  const shape = { rows: n, cols: 1, dstOffset: opts.outIndex ?? 0, scale: opts.scale, reduction: opts.reduction };
  return planColumnSum(gpu, x, dst, shape, scratch);
}
