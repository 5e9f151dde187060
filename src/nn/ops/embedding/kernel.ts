/** Embedding: gather forward, deterministic scatter-add backward. See shaders/embedding.wgsl. */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { gpuScratch, planColumnSum, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import { accumulateConstant, checkBindings, checkDims, planEntry } from '../../../gpu/kernels/common.ts';
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

function dims(gpu: Gpu, s: EmbeddingShape, chunk = s.rows): GPUBuffer {
  checkDims('embedding', { rows: s.rows, vocab: s.vocab, dim: s.dim });
  return gpu.uniform([['u32', s.rows], ['u32', s.dim], ['u32', s.vocab], ['u32', chunk]], 'embedding-dims');
}

/** out[r, :] = weight[ids[r], :]; ids are u32 (check them with `checkIds`). */
export function planEmbeddingForward(gpu: Gpu, s: EmbeddingShape, ids: Binding, weight: Binding, out: Binding): Dispatch {
  checkBindings('embedding forward', { ids: [ids, s.rows], weight: [weight, s.vocab * s.dim], out: [out, s.rows * s.dim] }, { shape: { ...s } });
  return planEntry(gpu, 'embedding', 'forward', [[0, dims(gpu, s)], [1, ids], [2, weight], [3, out]], linearGroups(s.rows * s.dim, 256));
}

/**
 * dweight[v, :] (=, or += with `accumulate`) Σ over rows r with ids[r] = v of
 * dy[r, :]: per-chunk partials (`embeddingChunks`) into scratch, then a
 * column-sum tree (reduce-rows.ts) into dweight; one dispatch when the rows
 * fit one chunk.
 */
export function planEmbeddingBackward(gpu: Gpu, s: EmbeddingShape, ids: Binding, dy: Binding, dweight: Binding, accumulate = false, scratch: Scratch = gpuScratch(gpu)): Dispatch[] {
  checkBindings('embedding backward', { ids: [ids, s.rows], dy: [dy, s.rows * s.dim], dweight: [dweight, s.vocab * s.dim] }, { shape: { ...s } });
  const { chunk, chunks } = embeddingChunks(s);
  const entries = s.vocab * s.dim;
  const pass = (out: Binding, acc: boolean) =>
    planEntry(gpu, 'embedding', 'backward', [[0, dims(gpu, s, chunk)], [1, ids], [4, dy], [5, out]], linearGroups(chunks * entries, 256), accumulateConstant(acc));
  if (chunks === 1) return [pass(dweight, accumulate)];
  const partials = scratch(chunks * entries, 'embedding-partials');
  return [pass(partials, false), ...planColumnSum(gpu, partials, dweight, { rows: chunks, cols: entries, accumulate }, scratch)];
}

/** Copies ids into a Uint32Array for upload, refusing any that is not an integer in [0, vocab). */
export function checkIds(ids: ArrayLike<number>, rows: number, vocab: number, out: Uint32Array = new Uint32Array(rows)): Uint32Array {
  if (ids.length < rows) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `expected ${rows} token ids, got ${ids.length}`, { expected: rows, got: ids.length });
  }
  for (let i = 0; i < rows; i++) {
    const v = ids[i];
    if (!Number.isInteger(v) || v < 0 || v >= vocab) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `token id ${i} is ${v}; ids must be integers in [0, ${vocab}) (the embedding's vocabulary size)`, { index: i, id: v, vocab });
    }
    out[i] = v;
  }
  return out;
}
