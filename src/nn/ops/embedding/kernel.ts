/**
 * Embedding: gather forward, deterministic scatter-add backward. See
 * shaders/embedding.wgsl and shaders/embedding_order.wgsl.
 *
 * The backward pass sorts the rows by token id on the GPU (a bitonic sort of
 * row indices), then sums each token's rows in row order, tile by tile: about
 * rows × dim reads of dy, whatever the vocabulary, and no float atomics.
 *
 * A weight bigger than one binding (GPT-2's [50257, 768] is 154 MB against
 * lavapipe's 128 MiB) is planned as slices of vocabulary rows (`rowSlices`):
 * forward, each slice writes the output rows whose ids fall in it; backward,
 * the sort is shared and each slice writes its own rows of the gradient, summed
 * in the same order as unsliced: the same bits.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { gpuScratch, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import {
  accumulateConstant,
  checkBindings,
  checkDims,
  planEntry,
  rowSlices,
  type RowSlice,
  subRange,
} from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('embedding', { shader: 'embedding', entryPoints: ['forward', 'clear', 'segments', 'joins'] });
defineKernel('embedding_order', { shader: 'embedding_order', entryPoints: ['init', 'sort_step'] });

/** Sorted positions one `segments` invocation walks: short loops, and tiles × dim invocations to fill the GPU. */
export const EMBEDDING_TILE = 64;
/** Loop iterations an invocation may take: lavapipe stops one silently past this (see checkAttentionLoopCap). */
const LOOP_CAP = 65_535;

export interface EmbeddingShape {
  /** Number of looked-up ids (batch × positions). */
  rows: number;
  vocab: number;
  dim: number;
}

/** The uniform of one vocabulary slice: its rows [slice.start, slice.start + slice.count) of the whole `s.vocab`. */
function dims(gpu: Gpu, s: EmbeddingShape, slice: RowSlice): GPUBuffer {
  checkDims('embedding', { rows: s.rows, vocab: s.vocab, dim: s.dim });
  return gpu.uniform(
    [
      ['u32', s.rows],
      ['u32', s.dim],
      ['u32', slice.count],
      ['u32', EMBEDDING_TILE],
      ['u32', slice.start],
      ['u32', s.vocab],
    ],
    'embedding-dims',
  );
}

/** out[r, :] = weight[ids[r], :]; ids are u32 (check them with `checkIds`). One dispatch per slice of the weight's rows. */
export function planEmbeddingForward(
  gpu: Gpu,
  s: EmbeddingShape,
  ids: Binding,
  weight: Binding,
  out: Binding,
): Dispatch[] {
  checkBindings(
    'embedding forward',
    { ids: [ids, s.rows], weight: [weight, s.vocab * s.dim], out: [out, s.rows * s.dim] },
    { shape: { ...s } },
  );
  return rowSlices(gpu, s.vocab, s.dim, 'embedding forward: the weight').map((slice) =>
    planEntry(
      gpu,
      'embedding',
      'forward',
      [
        [0, dims(gpu, s, slice)],
        [1, ids],
        [2, subRange(weight, slice.start * s.dim, slice.count * s.dim)],
        [3, out],
      ],
      linearGroups(s.rows * s.dim, 256),
    ),
  );
}

/** Slots of the sort: rows rounded up to a power of two. */
export function sortSlots(rows: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, rows)));
}

/** Fills `order` (sortSlots(rows) words) with the row indices sorted by (ids[r], r): 1 + log2(n)·(log2(n)+1)/2 dispatches. */
export function planRowOrder(gpu: Gpu, rows: number, ids: Binding, order: Binding): Dispatch[] {
  const padded = sortSlots(rows);
  const groups = linearGroups(padded, 256);
  const step = (k: number, j: number): [number, Binding] => [
    0,
    gpu.uniform(
      [rows, padded, k, j].map((v): ['u32', number] => ['u32', v]),
      'embedding_order-step',
    ),
  ];
  const passes = [planEntry(gpu, 'embedding_order', 'init', [step(0, 0), [2, order]], groups)];
  for (let k = 2; k <= padded; k *= 2) {
    for (let j = k / 2; j >= 1; j /= 2) {
      passes.push(planEntry(gpu, 'embedding_order', 'sort_step', [step(k, j), [1, ids], [2, order]], groups));
    }
  }
  return passes;
}

/** The tiles of `s`'s backward pass; refuses more than one `joins` invocation may walk (twice) under the loop cap. */
export function checkEmbeddingTiles(s: EmbeddingShape): number {
  const tiles = Math.ceil(s.rows / EMBEDDING_TILE);
  if (2 * tiles + EMBEDDING_TILE <= LOOP_CAP) return tiles;
  const most = Math.floor((LOOP_CAP - EMBEDDING_TILE) / 2) * EMBEDDING_TILE;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `embedding backward over ${s.rows} token ids would walk ${tiles} tiles in one shader invocation, past the ${LOOP_CAP} loop iterations some adapters allow; use at most ${most} ids per step (batch × context): a smaller --batch or --context`,
    { rows: s.rows, tiles, mostRows: most },
  );
}

/**
 * dweight[v, :] (=, or += with `accumulate`) Σ over rows r with ids[r] = v of
 * dy[r, :], in row order: the rows sorted by id into scratch (`planRowOrder`),
 * then per slice of vocabulary rows: clear (unless accumulating), the runs
 * within tiles, and the runs across tiles. See shaders/embedding.wgsl.
 */
export function planEmbeddingBackward(
  gpu: Gpu,
  s: EmbeddingShape,
  ids: Binding,
  dy: Binding,
  dweight: Binding,
  accumulate = false,
  scratch: Scratch = gpuScratch(gpu),
): Dispatch[] {
  checkBindings(
    'embedding backward',
    { ids: [ids, s.rows], dy: [dy, s.rows * s.dim], dweight: [dweight, s.vocab * s.dim] },
    { shape: { ...s } },
  );
  const tiles = checkEmbeddingTiles(s);
  const order = scratch(sortSlots(s.rows), 'embedding_order');
  const parts = scratch(2 * tiles * s.dim, 'embedding-parts');
  const slices = rowSlices(gpu, s.vocab, s.dim, "embedding backward: the weight's gradient");
  const perSlice = (slice: RowSlice): Dispatch[] => {
    const u: [number, Binding] = [0, dims(gpu, s, slice)];
    const out: [number, Binding] = [5, subRange(dweight, slice.start * s.dim, slice.count * s.dim)];
    const clear = planEntry(gpu, 'embedding', 'clear', [u, out], linearGroups(slice.count * s.dim, 256));
    const common: [number, Binding][] = [u, [1, ids], out, [6, order], [7, parts]];
    const walk = (entry: 'segments' | 'joins', bindings: [number, Binding][]) =>
      planEntry(gpu, 'embedding', entry, bindings, linearGroups(tiles * s.dim, 256), accumulateConstant(accumulate));
    const runs = [walk('segments', [...common, [4, dy]]), walk('joins', common)];
    return accumulate ? runs : [clear, ...runs];
  };
  return [...planRowOrder(gpu, s.rows, ids, order), ...slices.flatMap(perSlice)];
}

/** Copies ids into a Uint32Array for upload, refusing any that is not an integer in [0, vocab). */
export function checkIds(
  ids: ArrayLike<number>,
  rows: number,
  vocab: number,
  out: Uint32Array = new Uint32Array(rows),
): Uint32Array {
  if (ids.length < rows) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `expected ${rows} token ids, got ${ids.length}`, {
      expected: rows,
      got: ids.length,
    });
  }
  for (let i = 0; i < rows; i++) {
    const v = ids[i];
    if (!Number.isInteger(v) || v < 0 || v >= vocab) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `token id ${i} is ${v}; ids must be integers in [0, ${vocab}) (the embedding's vocabulary size)`,
        { index: i, id: v, vocab },
      );
    }
    out[i] = v;
  }
  return out;
}
