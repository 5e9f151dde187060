/**
 * Shards a dataset across the ranks of a data-parallel job. Every rank draws
 * the same permutation from (seed, epoch), pads it to a multiple of `size` by
 * wrapping around (so every shard has the same length and every rank runs
 * the same number of steps: a rank with fewer steps would hang the ring),
 * then takes every size-th index starting at its rank.
 *
 * The strided split means that step t of all ranks together covers exactly
 * the examples that step t of one rank with a size× larger batch would cover,
 * which is what makes N peers at batch B equivalent to one peer at N·B.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { epochOrder } from './batches.ts';

export interface ShardOptions {
  rank: number;
  size: number;
  /** undefined: no shuffling (dataset order). */
  seed?: number;
}

export class DistributedSampler {
  readonly rank: number;
  readonly size: number;
  readonly seed: number | undefined;
  readonly examples: number;
  /** Examples each rank sees per epoch (equal on every rank). */
  readonly shardLength: number;

  constructor(examples: number, opts: ShardOptions) {
    const { rank, size, seed } = opts;
    if (!Number.isInteger(size) || size < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `sampler: size must be a positive integer, got ${size}.`, {
        size,
      });
    }
    if (!Number.isInteger(rank) || rank < 0 || rank >= size) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `sampler: rank ${rank} is outside 0..${size - 1}.`, {
        rank,
        size,
      });
    }
    if (!Number.isInteger(examples) || examples < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `sampler: the dataset has no examples (${examples}).`, {
        examples,
      });
    }
    this.rank = rank;
    this.size = size;
    this.seed = seed;
    this.examples = examples;
    this.shardLength = Math.ceil(examples / size);
  }

  /** This rank's example indices for `epoch`, in the order to visit them. */
  indices(epoch: number): Uint32Array {
    const order = epochOrder(this.examples, this.seed, epoch);
    const shard = new Uint32Array(this.shardLength);
    for (let k = 0; k < this.shardLength; k++) {
      shard[k] = order[(k * this.size + this.rank) % this.examples];
    }
    return shard;
  }
}
