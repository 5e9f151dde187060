/**
 * How this rank's contribution becomes the ring's: the ring allreduce (with
 * compression, and for int8 and top-k the error-feedback residual that sends
 * what quantisation cut off this step with the next one, so no part of any
 * gradient is lost over time), or a robust rule. The flat buffer is reduced
 * where it lies (chunks of the fusion threshold, no packing or unpacking).
 */
import type { Communicator } from '../../comm/interface.ts';
import { allreduceInPlace } from '../../collectives/allreduce.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import { RobustSum } from './robust-sum.ts';
import type { ReduceSettings } from './settings.ts';

type SegmentObserver = (offset: number, values: Float32Array) => void;

export class GradientSum {
  /** int8's and top-k's error-feedback residual (see ringAllreduceInPlace); null until the first step. */
  private residual: Float32Array | null = null;
  private readonly robust: RobustSum | undefined;
  private readonly feedback: boolean;

  constructor(
    private readonly s: ReduceSettings,
    aggregation: Aggregation | undefined,
    /** The checks that see the ring's reduce-scatter segments (gradient-check.ts's CheckPipeline). */
    private readonly observers: { observeReceived?: SegmentObserver; observeSent?: SegmentObserver },
  ) {
    this.robust = aggregation ? new RobustSum(aggregation) : undefined;
    this.feedback = s.compression === 'int8' || s.compression.startsWith('topk:');
  }

  /** The whole contribution, reduced in place; `prescale` (1/k) turns k summed passes into their mean. */
  async whole(
    comm: Communicator,
    flat: Float32Array,
    name: string,
    prescale: number | undefined,
  ): Promise<Float32Array> {
    const { s } = this;
    if (this.robust) {
      const out = await this.robust.reduce(comm, flat, { name, timeoutMs: s.timeoutMs });
      // Robust rules give a mean-like value: scaled as the ring's average (or sum) of the passes' mean would be.
      const scale = (prescale ?? 1) * (s.op === 'sum' ? comm.size : 1);
      for (let i = 0; i < flat.length; i++) flat[i] = out[i] * scale;
      return flat;
    }
    if (this.feedback && this.residual?.length !== flat.length) this.residual = new Float32Array(flat.length);
    await allreduceInPlace(comm, flat, {
      errorFeedback: this.feedback ? this.residual! : undefined,
      name,
      op: s.op,
      compression: s.compression,
      chunkBytes: s.fusionThresholdBytes,
      prescale,
      timeoutMs: s.timeoutMs,
      observeReceived: this.observers.observeReceived,
      observeSent: this.observers.observeSent,
    });
    return flat;
  }

  /** One bucket of the contribution, reduced in place (the bucket path: no residual, no observer, one pass). */
  bucket(comm: Communicator, values: Float32Array, name: string): Promise<unknown> {
    const { s } = this;
    return allreduceInPlace(comm, values, {
      name,
      op: s.op,
      compression: s.compression,
      chunkBytes: s.fusionThresholdBytes,
      timeoutMs: s.timeoutMs,
    });
  }

  /** The step's checks passed: what a robust rule keeps of it becomes its reference. */
  stepPassed(): void {
    this.robust?.stepPassed();
  }

  /** Which rank sends which positions depends on the ring: a residual of the old ring means nothing in the new one. */
  ringReformed(): void {
    this.residual?.fill(0);
    this.robust?.ringReformed();
  }
}
