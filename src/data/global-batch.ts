/**
 * A job's global batch and each rank's share of it. At step t the ring as a
 * whole takes the G examples that one peer at batch G would take: with epochs,
 * examples order[o .. o+G) of the epoch's permutation, where o counts the
 * examples the ring has taken this epoch; with draws (the words), the draw of
 * step t. Rank r takes a contiguous slice of those G, of length shares[r]
 * (equal shares by default, sizes differing by at most one).
 *
 * Each rank's loss is a mean over its own counted targets, so the ring weighs
 * rank r's gradient by its share of the step's counted targets (`targetShare`):
 * the sum over ranks is then the mean over all G examples, whatever the shares,
 * and N peers at shares summing to G take the step of one peer at batch G.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { batchCount, batchOf, drawWithReplacement, epochOrder, type Batch } from './batches.ts';
import { countedTargets, selectExamples, type Dataset } from './dataset.ts';

/** G examples over `size` ranks: equal parts, the first G mod size ranks one more. */
export function equalShares(global: number, size: number): number[] {
  checkShares(global, size);
  const base = Math.floor(global / size);
  const extra = global % size;
  return Array.from({ length: size }, (_, r) => base + (r < extra ? 1 : 0));
}

/** Throws when G examples cannot give every one of `size` ranks at least one. */
export function checkShares(global: number, size: number): void {
  if (!Number.isInteger(size) || size < 1)
    throw new RingtrainError(ErrorCode.InvalidArgument, `a ring needs at least one peer, got ${size}`, { size });
  if (!Number.isInteger(global) || global < size) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the global batch of ${global} cannot give each of ${size} peers an example; raise --global-batch to at least ${size} or use fewer peers`,
      { global, size },
    );
  }
}

/** Where rank `rank`'s slice starts in the global batch. */
export function shareOffset(shares: readonly number[], rank: number): number {
  let o = 0;
  for (let q = 0; q < rank; q++) o += shares[q];
  return o;
}

export interface GlobalStep {
  /** Examples per step for the whole ring. */
  global: number;
  /** Every rank's share (sums to `global`). */
  shares: readonly number[];
  rank: number;
  seed: number | undefined;
  epoch: number;
  /** Examples the ring has taken so far this epoch. */
  epochExamples: number;
  /** Draw each step's G examples with replacement instead of walking the epoch's permutation. */
  replacement?: boolean;
}

/** Steps in one epoch at global batch G (the last partial batch is dropped). */
export function stepsPerEpoch(examples: number, global: number): number {
  return batchCount(examples, global);
}

/** True when the epoch has no full global batch left at this position. */
export function epochDone(examples: number, s: Pick<GlobalStep, 'global' | 'epochExamples'>): boolean {
  return s.epochExamples + s.global > examples;
}

/** One epoch permutation, kept while the (seed, epoch) stays: every step of an epoch reads it. */
export class EpochOrders {
  private key = '';
  private order: Uint32Array = new Uint32Array(0);
  of(examples: number, seed: number | undefined, epoch: number): Uint32Array {
    const key = `${examples}/${seed}/${epoch}`;
    if (key !== this.key) [this.key, this.order] = [key, epochOrder(examples, seed, epoch)];
    return this.order;
  }
}

/** The G example indices of the ring's step at this position (every rank computes the same). */
export function globalIndices(
  d: Dataset,
  s: Omit<GlobalStep, 'shares' | 'rank'>,
  orders: EpochOrders = new EpochOrders(),
): Uint32Array {
  if (s.replacement) {
    const n = stepsPerEpoch(d.count, s.global);
    if (n === 0)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `a global batch of ${s.global} is larger than the ${d.count} examples; use a smaller batch.`,
        { batch: s.global, examples: d.count },
      );
    // The draw of step epoch·n + b, as one peer at batch G draws it (batches.ts).
    return drawWithReplacement(d.count, s.global, s.seed ?? 0, s.epoch * n + Math.floor(s.epochExamples / s.global));
  }
  if (epochDone(d.count, s))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `no global batch of ${s.global} is left at example ${s.epochExamples} of ${d.count} this epoch`,
    );
  return orders.of(d.count, s.seed, s.epoch).slice(s.epochExamples, s.epochExamples + s.global);
}

/** This rank's part of the ring's step, weighed by its share of the step's counted targets. */
export function rankBatch(
  d: Dataset,
  s: GlobalStep,
  orders?: EpochOrders,
): Batch & { targetShare: number; ringTargets: number } {
  if (s.shares.length < 1 || s.rank < 0 || s.rank >= s.shares.length)
    throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${s.rank} is outside 0..${s.shares.length - 1}`);
  const total = s.shares.reduce((a, b) => a + b, 0);
  if (total !== s.global || s.shares.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `batch shares [${s.shares.join(', ')}] must be whole numbers >= 1 summing to the global batch ${s.global}`,
    );
  }
  const all = globalIndices(d, s, orders);
  const start = shareOffset(s.shares, s.rank);
  const batch = batchOf(d, all.slice(start, start + s.shares[s.rank]));
  const counted = countedTargetsOf(d, all);
  return {
    ...batch,
    targetShare: counted > 0 ? countedTargets(batch.labels) / counted : s.shares[s.rank] / s.global,
    ringTargets: counted,
  };
}

/** Counted targets (labels other than IGNORE_LABEL) of examples `indices`, without copying them. */
function countedTargetsOf(d: Dataset, indices: Uint32Array): number {
  // Every target of a stream's window is a real next token.
  if (d.stream) return indices.length * d.positions;
  if (d.positions === 1) {
    let n = 0;
    for (const i of indices) if (d.labels[i] >= 0) n++;
    return n;
  }
  let n = 0;
  for (const i of indices) n += countedTargets(d.labels.subarray(i * d.positions, (i + 1) * d.positions));
  return n;
}

/** The examples of `test` that this rank evaluates (strided, so shards differ by at most one). */
export function testShard(test: Dataset, rank: number, size: number): Dataset {
  const idx: number[] = [];
  for (let i = rank; i < test.count; i += size) idx.push(i);
  return selectExamples(test, idx);
}
