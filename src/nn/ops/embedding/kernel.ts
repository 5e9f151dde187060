/**
 * Embedding: gather forward, deterministic scatter-add backward. See shaders/embedding.wgsl.
 *
 * A weight bigger than one binding (GPT-2's [50257, 768] is 154 MB against
 * lavapipe's 128 MiB) is planned as slices of vocabulary rows (`rowSlices`):
 * forward, each slice writes the output rows whose ids fall in it; backward,
 * each slice sums its own rows of the gradient. The chunks of the backward
 * pass come from the whole shape, so every entry is summed in the same order
 * as unsliced: the same bits.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { gpuScratch, planColumnSum, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
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

defineKernel('embedding', { shader: 'embedding', entryPoints: ['forward', 'backward'] });

/** Rows per chunk of the backward pass's first level, unless the partials would pass EMBEDDING_MAX_PARTIAL. */
export const EMBEDDING_CHUNK = 64;
/** Partials (chunks × vocab × dim floats) stay below this: large vocabularies get longer chunks (their vocab × dim entries fill the GPU anyway). */
const EMBEDDING_MAX_PARTIAL = 1 << 22;

/** Rows per chunk and chunks of the backward pass for this shape. */
export function embeddingChunks(s: EmbeddingShape): { chunk: number; chunks: number } {
  const most = Math.max(1, Math.floor(EMBEDDING_MAX_PARTIAL / (s.vocab * s.dim)));
  const chunk = Math.max(EMBEDDING_CHUNK, Math.ceil(s.rows / most));
  return { chunk, chunks: Math.ceil(s.rows / chunk) };
}

export interface EmbeddingShape {
  /** Number of looked-up ids (batch × positions). */
  rows: number;
  vocab: number;
  dim: number;
}

/** The uniform of one vocabulary slice: its rows [slice.start, slice.start + slice.count) of the whole `s.vocab`. */
function dims(gpu: Gpu, s: EmbeddingShape, slice: RowSlice, chunk = s.rows): GPUBuffer {
  checkDims('embedding', { rows: s.rows, vocab: s.vocab, dim: s.dim });
  return gpu.uniform(
    [
      ['u32', s.rows],
      ['u32', s.dim],
      ['u32', slice.count],
      ['u32', chunk],
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

/**
 * dweight[v, :] (=, or += with `accumulate`) Σ over rows r with ids[r] = v of
 * dy[r, :]: per-chunk partials (`embeddingChunks`) into scratch, then a
 * column-sum tree (reduce-rows.ts) into dweight; one dispatch when the rows
 * fit one chunk. Per slice of vocabulary rows when dweight (or the partials)
 * would pass one binding; the slices share one partials buffer, which each
 * slice's sum has read before the next slice's pass writes it (dispatches run in order).
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
  const { chunk, chunks } = embeddingChunks(s);
  const slices = rowSlices(gpu, s.vocab, s.dim, "embedding backward: the weight's gradient", s.dim * chunks);
  const partials = chunks === 1 ? null : scratch(chunks * slices[0].count * s.dim, 'embedding-partials');
  return slices.flatMap((slice) => {
    const entries = slice.count * s.dim;
    const target = subRange(dweight, slice.start * s.dim, entries);
    const pass = (out: Binding, acc: boolean) =>
      planEntry(
        gpu,
        'embedding',
        'backward',
        [
          [0, dims(gpu, s, slice, chunk)],
          [1, ids],
          [4, dy],
          [5, out],
        ],
        linearGroups(chunks * entries, 256),
        accumulateConstant(acc),
      );
    if (!partials) return [pass(target, accumulate)];
    const here = subRange(partials, 0, chunks * entries);
    return [
      pass(here, false),
      ...planColumnSum(gpu, here, target, { rows: chunks, cols: entries, accumulate }, scratch),
    ];
  });
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
