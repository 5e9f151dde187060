/**
 * How long this rank's own compute of a step took: what balancing by speed
 * divides by (shares.ts), not the waiting for other ranks. Its fields are
 * written by its own methods alone, in one order each step: `begin` when the
 * step's compute starts, then `end` where this rank's contribution is ready.
 * For a step that reduces, that is the first check around the sum, which sees
 * the gradients as read back (`gradientsRead`, after the caller's transform:
 * a slowed rank's delay counts as its compute); for a backward pass that is
 * only summed, it is when the pass is in.
 */
import { now } from '../../core/events.ts';
import type { GradientCheck } from '../reduce/gradient-check.ts';
import type { DistributedTrainArgs } from './trainer-types.ts';

export class StepClock {
  private start = 0;
  private computed = 0;

  /** The step's compute began at `t` (now()). */
  begin(t: number): void {
    this.start = t;
  }

  /** This rank's compute of the step is over. */
  end(): void {
    this.computed = now() - this.start;
  }

  /** The last step's compute, in ms. */
  get computeMs(): number {
    return this.computed;
  }

  /** The check that first sees a step's gradients as read back: the caller's look at them, then the end of this rank's compute. */
  gradientsRead(transform: DistributedTrainArgs['transformGradients']): GradientCheck {
    return {
      // A caller's transform may change the gradients, and must do so before any of them is sent.
      readsOnly: transform === undefined,
      rankLocal: true,
      before: async (_comm, local, step) => {
        await transform?.(local, step, now() - this.start);
        // This rank's compute (a slowed rank's included), not the waiting for others.
        this.end();
      },
      // Without a transform it reads no value: the reducer keeps no copy for it.
      digest: transform ? undefined : () => ({ add() {}, finish: () => this.end() }),
    };
  }
}
