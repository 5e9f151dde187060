/**
 * Gradient buckets, as PyTorch DDP cuts them: contiguous ranges of the flat
 * gradient buffer, from the end of the layout backward, because backward
 * finishes the last layers first. A model that records backward in pieces
 * reads each bucket back as soon as the step that finishes it has run, and the
 * ring reduces it while the layers before it still compute (src/distributed/reduce/).
 *
 * A bucket holds whole tensors. The zero padding after a tensor (model.ts,
 * PARAM_ALIGN) belongs to that tensor's bucket, so the buckets tile the flat
 * buffer exactly and writing them back is writing the whole buffer.
 *
 * Boundaries depend on the layout, the bucket size and which backward step
 * finishes each tensor's gradient, an order the model's graph fixes whatever
 * the batch size: every rank of a job cuts the same buckets, which are reduced
 * under the same names (the response cache then hits every step after the
 * first; a rank that cut others would fail negotiation, named, not sum wrong).
 * GraphModel cuts them once per plan.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { ParamEntry } from './model.ts';

// Declared beside Model, whose readback hands them out.
export type { GradientBucket } from './model.ts';

/**
 * 256 KiB. A bucket is one collective: large enough that its fixed cost (a few message latencies,
 * about what a LAN link carries of 128 KB in the same time) is small beside its transfer, small
 * enough that the built-in models get more than one: the MLP's last layer (6 KB) is reduced while
 * its 400 KB first layer computes, the transformer's 400 KB go in two. DDP's 25 MB would give
 * every model here one bucket, that is no overlap. The fusion threshold caps it
 * (src/distributed/reduce/overlap-plan.ts).
 */
export const DEFAULT_BUCKET_BYTES = 256 * 1024;

/**
 * A larger gradient is cut into about this many buckets at most: beyond a few, the overlap gains
 * little more (the last bucket still waits for the first layer's backward), and every bucket is a
 * collective with its own messages. A 400 MB model gets 25 MB buckets, as in DDP.
 */
export const MAX_BUCKETS = 16;

/** The bucket size for a gradient of `flatBytes`: DEFAULT_BUCKET_BYTES, larger for a large one, never past `capBytes` (the fusion threshold). */
export function bucketBytesFor(flatBytes: number, capBytes: number): number {
  return Math.min(capBytes, Math.max(DEFAULT_BUCKET_BYTES, Math.ceil(flatBytes / MAX_BUCKETS)));
}

/** Where a bucket lies, and how many backward steps must run before it is final. */
export interface BucketRange {
  offset: number;
  length: number;
  /** Layout entries it holds, [first, end). */
  entries: [number, number];
  /** Backward steps after which every gradient in it is final (never less than the bucket before's). */
  after: number;
}

/**
 * Cuts the layout into buckets from its end. The unit is a run of consecutive tensors whose gradients
 * are final after the same backward step (a layer's weight and bias): splitting one would gain
 * nothing, and a bucket holding the bias of the layer before would wait for that whole layer. A
 * bucket closes when the next unit would take it past `bucketBytes` (planFusion's rule); a unit
 * larger than that is a bucket of its own. `finalAfter(i)`: the backward steps after which layout
 * entry i's gradient is final.
 */
export function planBuckets(
  layout: readonly ParamEntry[],
  flatLength: number,
  bucketBytes: number,
  finalAfter: (entry: number) => number,
): BucketRange[] {
  if (!(bucketBytes > 0))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `gradient buckets: bucketBytes must be a number > 0, got ${bucketBytes}`,
    );
  const spanOf = (i: number) => ((i + 1 < layout.length ? layout[i + 1].offset : flatLength) - layout[i].offset) * 4;
  const buckets: BucketRange[] = [];
  let end = layout.length;
  let bytes = 0;
  let after = 0;
  const close = (first: number) => {
    if (first === end) return;
    const offset = layout[first].offset;
    const stop = end < layout.length ? layout[end].offset : flatLength;
    // Read in order: a bucket finished early (a tied weight at the end) waits for the one before it.
    for (let k = first; k < end; k++) after = Math.max(after, finalAfter(k));
    buckets.push({ offset, length: stop - offset, entries: [first, end], after });
    end = first;
    bytes = 0;
  };
  let unitEnd = layout.length;
  for (let i = layout.length - 1; i >= 0; i--) {
    // entries [i, unitEnd) are one unit once the tensor before i is final at another step (or there is none).
    if (i > 0 && finalAfter(i - 1) === finalAfter(i)) continue;
    let unit = 0;
    for (let k = i; k < unitEnd; k++) unit += spanOf(k);
    if (bytes > 0 && bytes + unit > bucketBytes) close(unitEnd);
    bytes += unit;
    unitEnd = i;
  }
  close(0);
  // The first tensor starts at 0 (layoutOf): the buckets cover [0, flatLength).
  return buckets;
}
