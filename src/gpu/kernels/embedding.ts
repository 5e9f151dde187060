/** Embedding: gather forward, deterministic scatter-add backward. See shaders/embedding.wgsl. */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkBindings } from './conv2d.ts';
import { checkDims } from './matmul.ts';
import { accumulateConstant, planEntry } from './plan-entry.ts';

export interface EmbeddingShape {
  /** Number of looked-up ids (batch × positions). */
  rows: number;
  vocab: number;
  dim: number;
}

function dims(gpu: Gpu, s: EmbeddingShape): GPUBuffer {
  checkDims('embedding', { rows: s.rows, vocab: s.vocab, dim: s.dim });
  return gpu.uniform([['u32', s.rows], ['u32', s.dim], ['u32', s.vocab], ['u32', 0]], 'embedding-dims');
}

/** out[r, :] = weight[ids[r], :]; ids are u32 (check them with `checkIds`). */
export function planEmbeddingForward(gpu: Gpu, s: EmbeddingShape, ids: Binding, weight: Binding, out: Binding): Dispatch {
  checkBindings('embedding forward', { ids: [ids, s.rows], weight: [weight, s.vocab * s.dim], out: [out, s.rows * s.dim] }, { shape: { ...s } });
  return planEntry(gpu, 'embedding', 'forward', [[0, dims(gpu, s)], [1, ids], [2, weight], [3, out]], linearGroups(s.rows * s.dim, 256));
}

/** dweight[v, :] (=, or += with `accumulate`) Σ over rows r with ids[r] = v of dy[r, :]. */
export function planEmbeddingBackward(gpu: Gpu, s: EmbeddingShape, ids: Binding, dy: Binding, dweight: Binding, accumulate = false): Dispatch {
  checkBindings('embedding backward', { ids: [ids, s.rows], dy: [dy, s.rows * s.dim], dweight: [dweight, s.vocab * s.dim] }, { shape: { ...s } });
  return planEntry(gpu, 'embedding', 'backward', [[0, dims(gpu, s)], [1, ids], [4, dy], [5, dweight]], linearGroups(s.vocab * s.dim, 256), accumulateConstant(accumulate));
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
