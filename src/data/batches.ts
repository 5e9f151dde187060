/**
 * Mini-batches over a dataset in a seeded order. Each batch is copied into
 * fresh contiguous arrays, ready to upload to the GPU in one write.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { countedTargets, type Dataset, gatherExamples } from './dataset.ts';
import { mixSeed, mulberry32, permutation } from './random.ts';

/** Keeps draws-with-replacement apart from the epoch permutations of the same seed. */
const DRAW_STREAM = 0x64726177;

export interface Batch {
  /** size × inputSize, row-major. */
  readonly x: Float32Array;
  /** size × positions integer targets (a class index per example for a classifier); IGNORE_LABEL (-1) is skipped by the loss. */
  readonly labels: Int32Array;
  readonly size: number;
  /** Which dataset examples are in this batch, in order. */
  readonly indices: Uint32Array;
  /**
   * A rank's share of a drawn global batch: this batch's counted targets over the
   * whole draw's. Each rank's loss is a mean over its own counted positions, so a
   * ring that weighs rank r's gradient by size · targetShare averages to the mean
   * over the whole draw, as one peer at the global batch computes it.
   */
  readonly targetShare?: number;
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
  /**
   * Draw every batch uniformly at random WITH replacement (the transformer
   * workload) instead of walking a permutation. An epoch is then only a count
   * of steps, batchCount(examples, global batch); batch b of epoch e is the
   * draw of step e·n + b, so resuming and the epoch bookkeeping stay as they are.
   */
  replacement?: boolean;
  /** With replacement: draw batchSize × size per step and keep rank's share, so N peers see what one peer at N× the batch sees. */
  share?: { rank: number; size: number };
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
    throw new RingtrainError(ErrorCode.InvalidArgument, `batch size must be a positive integer, got ${batchSize}.`, {
      batchSize,
    });
  }
  if (opts.replacement) {
    yield* drawnBatches(d, opts);
    return;
  }
  let order: ArrayLike<number>;
  if (opts.indices) {
    const base = opts.indices;
    const perm = epochOrder(base.length, opts.seed, opts.epoch);
    order = Uint32Array.from(perm, (p) => base[p]);
  } else {
    order = epochOrder(d.count, opts.seed, opts.epoch);
  }
  const n = batchCount(order.length, batchSize, dropLast);
  for (let b = opts.startBatch ?? 0; b < n; b++) {
    const start = b * batchSize;
    const size = Math.min(batchSize, order.length - start);
    const indices = Uint32Array.from({ length: size }, (_, k) => order[start + k]);
    yield batchOf(d, indices);
  }
}

function* drawnBatches(d: Dataset, opts: BatchOptions): Generator<Batch> {
  if (opts.indices) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'batches drawn with replacement come from the whole dataset; pass share: { rank, size } instead of a shard of indices.',
    );
  }
  const { rank, size } = opts.share ?? { rank: 0, size: 1 };
  const global = opts.batchSize * size;
  const n = batchCount(d.count, global);
  if (n === 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `a batch of ${global} is larger than the ${d.count} examples; use a smaller batch.`,
      { batch: global, examples: d.count },
    );
  }
  const epoch = opts.epoch ?? 0;
  for (let b = opts.startBatch ?? 0; b < n; b++) {
    const draw = drawWithReplacement(d.count, global, opts.seed ?? 0, epoch * n + b);
    if (size === 1) {
      yield batchOf(d, draw);
      continue;
    }
    const batch = batchOf(d, rankShareOfDraw(draw, rank, size));
    const all = countedTargetsOf(d, draw);
    yield { ...batch, targetShare: all > 0 ? countedTargets(batch.labels) / all : 1 / size };
  }
}

/** Counted targets (labels other than IGNORE_LABEL) of examples `indices`, without copying them. */
function countedTargetsOf(d: Dataset, indices: Uint32Array): number {
  // Every target of a stream's window is a real next token.
  if (d.stream) return indices.length * d.positions;
  let n = 0;
  for (const i of indices) n += countedTargets(d.labels.subarray(i * d.positions, (i + 1) * d.positions));
  return n;
}

/** The batch holding examples `indices` (in that order; repeats allowed). */
export function batchOf(d: Dataset, indices: Uint32Array): Batch {
  const { inputs, labels } = gatherExamples(d, indices);
  return { x: inputs, labels, size: indices.length, indices };
}

/**
 * `size` example indices drawn uniformly at random WITH replacement, the
 * same on every rank and in every runtime for one (seed, step): how the
 * transformer workload samples its batches (no epochs). A step's draw is a
 * pure function of (seed, step), so resuming at step s draws what an
 * uninterrupted run would have drawn.
 */
export function drawWithReplacement(examples: number, size: number, seed: number, step: number): Uint32Array {
  if (!Number.isInteger(examples) || examples < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot draw from ${examples} examples; the dataset is empty.`,
      { examples },
    );
  }
  if (!Number.isInteger(size) || size <= 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `batch size must be a positive integer, got ${size}.`, {
      batchSize: size,
    });
  }
  const random = mulberry32(mixSeed(seed, step, DRAW_STREAM));
  return Uint32Array.from({ length: size }, () => Math.floor(random() * examples));
}

/**
 * Rank `rank`'s part of a global draw of `globalSize` indices: every size-th
 * index from `rank` on, as the DistributedSampler splits an epoch, so N peers
 * at batch B/N together see exactly the B examples that one peer at B sees.
 */
export function rankShareOfDraw(draw: Uint32Array, rank: number, size: number): Uint32Array {
  if (!Number.isInteger(size) || size < 1 || !Number.isInteger(rank) || rank < 0 || rank >= size) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank} is outside 0..${size - 1}.`, { rank, size });
  }
  if (draw.length % size !== 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `a batch of ${draw.length} does not split evenly over ${size} peers; pick a batch that is a multiple of ${size}.`,
      {
        batch: draw.length,
        peers: size,
      },
    );
  }
  return Uint32Array.from({ length: draw.length / size }, (_, k) => draw[k * size + rank]);
}
