/**
 * Mini-batches over a dataset in a seeded order. Each batch is copied into
 * fresh contiguous arrays, ready to upload to the GPU in one write.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type Dataset, pixelsPerImage } from './dataset.ts';
import { mixSeed, permutation } from './random.ts';

export interface Batch {
  /** size × pixels, row-major. */
  readonly x: Float32Array;
  /** size class indices, as u32 (what WGSL reads). */
  readonly labels: Uint32Array;
  readonly size: number;
  /** Which dataset examples are in this batch, in order. */
  readonly indices: Uint32Array;
}

export interface BatchOptions {
  batchSize: number;
  /** The example order: a permutation seeded by (seed, epoch), or the dataset order when seed is undefined. */
  seed?: number;
  epoch?: number;
  /** Drop a last batch smaller than batchSize (default true: every step sees the same batch shape). */
  dropLast?: boolean;
  /** Iterate over these example indices instead of all of them (a sampler's shard). */
  indices?: ArrayLike<number>;
  /** Skip the first batches of the epoch (resuming mid-epoch). */
  startBatch?: number;
}

/** The order in which one epoch visits the examples. */
export function epochOrder(count: number, seed: number | undefined, epoch = 0): Uint32Array {
  if (seed === undefined) return Uint32Array.from({ length: count }, (_, i) => i);
  return permutation(count, mixSeed(seed, epoch));
}

export function batchCount(examples: number, batchSize: number, dropLast = true): number {
  return dropLast ? Math.floor(examples / batchSize) : Math.ceil(examples / batchSize);
}

export function* batches(d: Dataset, opts: BatchOptions): Generator<Batch> {
  const { batchSize, dropLast = true } = opts;
  if (!Number.isInteger(batchSize) || batchSize <= 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `batch size must be a positive integer, got ${batchSize}.`, { batchSize });
  }
  let order: ArrayLike<number>;
  if (opts.indices) {
    const base = opts.indices;
    const perm = epochOrder(base.length, opts.seed, opts.epoch);
    order = Uint32Array.from(perm, (p) => base[p]);
  } else {
    order = epochOrder(d.count, opts.seed, opts.epoch);
  }
  const pixels = pixelsPerImage(d);
  const n = batchCount(order.length, batchSize, dropLast);
  for (let b = opts.startBatch ?? 0; b < n; b++) {
    const start = b * batchSize;
    const size = Math.min(batchSize, order.length - start);
    const x = new Float32Array(size * pixels);
    const labels = new Uint32Array(size);
    const indices = new Uint32Array(size);
    for (let k = 0; k < size; k++) {
      const i = order[start + k];
      x.set(d.images.subarray(i * pixels, (i + 1) * pixels), k * pixels);
      labels[k] = d.labels[i];
      indices[k] = i;
    }
    yield { x, labels, size, indices };
  }
}
