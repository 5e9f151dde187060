/**
 * Data sharding by rank. Rank r of N takes examples r, r+N, r+2N, … (every
 * rank the same count; the last n mod N examples are left out so no rank
 * takes an extra step the others would wait for). With that interleaving,
 * the union of the ranks' k-th batches of B is exactly the k-th batch of N·B
 * of the unsharded data, so N ranks train like one rank at the large batch.
 */
import * as tf from '@tensorflow/tfjs-core';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { resolveRing, type RingSource } from './ring.ts';

export interface ShardOptions {
  comm?: RingSource;
  /** Instead of a ring: this rank and the number of ranks. */
  rank?: number;
  size?: number;
  /**
   * Leave out the first `skip` examples: those the ring already took this
   * epoch before it re-formed (elastic.ts's `state.epochExamples`). The rest
   * is sharded over the ring as it is now.
   */
  skip?: number;
}

function rankAndSize(o: ShardOptions): { rank: number; size: number } {
  if (o.rank !== undefined || o.size !== undefined) {
    const { rank, size } = o as { rank: number; size: number };
    if (!Number.isInteger(size) || size < 1 || !Number.isInteger(rank) || rank < 0 || rank >= size) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `shard: rank ${rank} of size ${size} is not a rank of a ring; give 0 <= rank < size`,
      );
    }
    return { rank, size };
  }
  const comm = resolveRing(o.comm, 'shard');
  return { rank: comm.rank, size: comm.size };
}

/** The example indices this rank takes out of `n`. */
export function shardIndices(n: number, o: ShardOptions = {}): Int32Array {
  const { rank, size } = rankAndSize(o);
  const skip = o.skip ?? 0;
  if (!Number.isInteger(skip) || skip < 0 || skip > n) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `shard: skip ${skip} is not a count of examples already taken out of ${n}; give a whole number from 0 to ${n}`,
    );
  }
  const count = Math.floor((n - skip) / size);
  return Int32Array.from({ length: count }, (_, i) => skip + rank + i * size);
}

/** This rank's examples (rows along the first axis) of each tensor; all must have the same number of rows. */
export function shardTensors<T extends tf.Tensor>(tensors: T[], o: ShardOptions = {}): T[] {
  const n = tensors[0]?.shape[0];
  if (n === undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'shardTensors: give at least one tensor with a first (example) axis',
    );
  for (const t of tensors) {
    if (t.shape[0] !== n)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `shardTensors: tensors hold different numbers of examples (${n} and ${t.shape[0]}); pair inputs and labels row for row`,
      );
  }
  const idx = shardIndices(n, o);
  return tf.tidy(() => {
    const at = tf.tensor1d(idx, 'int32');
    return tensors.map((t) => tf.gather(t, at) as T);
  });
}

/** This rank's examples of a flat array holding `exampleLength` values per example. */
export function shardArray<A extends Float32Array | Int32Array | Uint8Array>(
  data: A,
  exampleLength: number,
  o: ShardOptions = {},
): A {
  if (!Number.isInteger(exampleLength) || exampleLength < 1 || data.length % exampleLength !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `shardArray: ${data.length} values do not split into examples of ${exampleLength}`,
    );
  }
  const idx = shardIndices(data.length / exampleLength, o);
  const out = new (data.constructor as new (n: number) => A)(idx.length * exampleLength);
  idx.forEach((e, i) => out.set(data.subarray(e * exampleLength, (e + 1) * exampleLength), i * exampleLength));
  return out;
}

/** What model.fitDataset needs of a tf.data.Dataset (so @tensorflow/tfjs-data is not a dependency). */
export interface DatasetLike<T> {
  readonly size: number | null;
  iterator(): Promise<{ next(): Promise<IteratorResult<T>> }>;
}

/**
 * This rank's elements of a tf.data.Dataset (shard before .batch(): elements
 * are examples). The result works with model.fitDataset; where the size is
 * unknown, ranks may differ by one element: give batchesPerEpoch.
 */
export function shardDataset<T>(dataset: DatasetLike<T>, o: ShardOptions = {}): DatasetLike<T> {
  if (o.skip)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'shardDataset: skip applies to tensors and arrays; call dataset.skip(n) before sharding instead',
    );
  const { rank, size } = rankAndSize(o);
  const count = dataset.size !== null && Number.isFinite(dataset.size) ? Math.floor(dataset.size / size) : null;
  return {
    size: count,
    async iterator() {
      const source = await dataset.iterator();
      let index = 0;
      let taken = 0;
      return {
        async next(): Promise<IteratorResult<T>> {
          for (;;) {
            if (count !== null && taken >= count) return { done: true, value: undefined };
            const r = await source.next();
            if (r.done) return r;
            if (index++ % size === rank) {
              taken++;
              return r;
            }
          }
        },
      };
    },
  };
}
