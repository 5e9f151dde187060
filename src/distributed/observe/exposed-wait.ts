/**
 * Exposed allreduce: how long a step of one rank waits on the ring once its own
 * compute is done. That is the gradient allreduce and whatever the step holds
 * for around it (the checks and their collectives, the membership agreement,
 * waiting for a slower peer, the finite check, the write-back of the sum and
 * the recording of the update), less what ran hidden behind backward (buckets
 * reduced while later ones computed).
 *
 * Read from the rank's own events: the step's compute is done when its last
 * gradient read-back ends (the last `gpu-wait` for gradients: the whole
 * gradient, or its last bucket), and the wait ends when the step closes, its
 * update submitted. A wait for the GPU in between (Deno submits the update in
 * parts, each waited for: `gpu-wait` 'update') is the update's compute, not the
 * ring's, and is left out as the read-back is; Node and browsers submit it
 * without waiting. A step that read no gradients back (an overflow's skipped
 * step, local SGD's steps) waited on no allreduce and is not counted; a
 * backward pass summed locally (backwardPassesPerStep > 1) is a step of the
 * loop, and waits next to nothing.
 */
import type { RingEvent } from '../../core/events.ts';

export class ExposedWait {
  /** When this step's last gradient read-back so far ended (undefined: none yet). */
  private readBackEnd: number | undefined;
  /** GPU waits since then (the update's), in ms. */
  private gpuMs = 0;
  private steps = 0;
  private steadyMs = 0;
  private steadySteps = 0;

  record(e: RingEvent): void {
    if (e.type !== 'gpu-wait') return;
    if (!e.what.startsWith('gradients')) {
      if (this.readBackEnd !== undefined && e.t >= this.readBackEnd) this.gpuMs += e.ms;
      return;
    }
    const end = e.t + e.ms;
    if (this.readBackEnd === undefined || end > this.readBackEnd) {
      this.readBackEnd = end;
      this.gpuMs = 0;
    }
  }

  /** Closes the step at `t` (ms, the events' clock); returns its exposed wait, or null when it read no gradients. */
  step(t: number): number | null {
    const exposed = this.readBackEnd === undefined ? null : Math.max(0, t - this.readBackEnd - this.gpuMs);
    this.readBackEnd = undefined;
    this.gpuMs = 0;
    // The first step negotiates everything and builds its plans: the steady state starts after it.
    if (this.steps++ > 0 && exposed !== null) {
      this.steadyMs += exposed;
      this.steadySteps++;
    }
    return exposed;
  }

  /** The mean exposed wait (ms) over every step but the first that read gradients back; null when none did. */
  perStepMs(): number | null {
    return this.steadySteps > 0 ? this.steadyMs / this.steadySteps : null;
  }
}
