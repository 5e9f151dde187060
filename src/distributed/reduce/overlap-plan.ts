/**
 * Whether a job's steps may reduce their gradients bucket by bucket as
 * backward finishes them (overlap.ts), and at what bucket size: decided once,
 * when the reducer is built, from settings every rank of the job shares, so
 * every rank cuts the same buckets. The first reason that applies is kept, so
 * a timeline or a test can say why a job reads its gradients whole.
 */
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import type { Compression } from '../../collectives/codecs/types.ts';
import { bucketBytesFor } from '../../engine/grad-buckets.ts';

export interface OverlapInputs {
  /** The job's `overlap` setting. */
  overlap: boolean;
  /** A robust rule (the mean is none). */
  aggregation: Aggregation | undefined;
  backwardPassesPerStep: number;
  compression: Compression;
  /** A check observes the segments the ring receives (the verified allreduce). */
  observes: boolean;
  /** A check may change the contribution in a way every rank must know of (CheckPipeline.changesForAll). */
  changesForAll: boolean;
  fusionThresholdBytes: number;
  /** The flat gradient's length in floats. */
  flatLength: number;
}

export interface OverlapPlan {
  /** Bytes per bucket; undefined: each step's gradient is read whole. */
  bucketBytes: number | undefined;
  /** Why the gradient is read whole ('' when it is not). */
  wholeBecause: string;
}

/** Each rule that keeps the gradient whole, in the order they are asked, with why. */
const WHOLE_GRADIENT_RULES: readonly [(i: OverlapInputs) => boolean, string][] = [
  [(i) => !i.overlap, 'the job turned the overlap off'],
  // Robust rules gather every rank's whole contribution in collectives of their own (centered clip
  // keeps the whole last aggregate): there is no ring allreduce to start early.
  [(i) => i.aggregation !== undefined, 'a robust aggregation gathers whole contributions'],
  // k passes are summed here and reduced once, on the k-th: the passes before send nothing to overlap.
  [(i) => i.backwardPassesPerStep > 1, 'backward passes are summed before one reduction'],
  // int8 scales each ring segment and top-k keeps the k largest of the whole tensor, each with an
  // error-feedback residual of the whole: bucket by bucket they would send other values.
  [(i) => i.compression !== 'none' && i.compression !== 'fp16', 'the compression keeps a residual of the whole'],
  // The verified allreduce sketches the ring chunks of the whole buffer (cut by the fusion
  // threshold: step-checks.ts); buckets would be reduced in other chunks than it checks.
  [(i) => i.observes, 'a check observes the ring chunks of the whole buffer'],
  // A check that may change the contribution in a way every rank must know of (the doubt rule's
  // factors) sees the whole gradient before any of it is sent. A caller's transform on one rank
  // does not change how the ranks cut the gradient: that rank only waits for every bucket.
  [(i) => i.changesForAll, 'a check sets factors every rank must know before sending'],
  // Each bucket is one collective; the fusion threshold caps it as it caps any of them.
  [(i) => i.fusionThresholdBytes < 4, 'the fusion threshold holds no float'],
];

export function planOverlap(inputs: OverlapInputs): OverlapPlan {
  const rule = WHOLE_GRADIENT_RULES.find(([applies]) => applies(inputs));
  if (rule) return { bucketBytes: undefined, wholeBecause: rule[1] };
  return { bucketBytes: bucketBytesFor(inputs.flatLength * 4, inputs.fusionThresholdBytes), wholeBecause: '' };
}
