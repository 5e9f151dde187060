/**
 * A robust rule's state between steps. Centered clipping compares each step's
 * contributions with the last step's aggregate, so that aggregate is kept, and
 * taken up only once the step's checks passed: a step they fail leaves the
 * reference as it was. A re-formed ring starts from zeros on every rank alike
 * (a joiner holds no reference).
 */
import type { Communicator } from '../../comm/interface.ts';
import { robustAllreduce, type Aggregation } from '../../collectives/robust/robust-aggregate.ts';

export class RobustSum {
  /** centered-clip's reference: the previous step's aggregate (null: zeros, at the start and after a re-form). */
  private reference: Float32Array | null = null;
  /** This step's aggregate, the reference once its update is applied. */
  private next: Float32Array | null = null;

  constructor(readonly aggregation: Aggregation) {}

  /** The rule's aggregate of every rank's `flat` (a mean-like value, not yet scaled). */
  async reduce(
    comm: Communicator,
    flat: Float32Array,
    o: { name: string; timeoutMs: number | undefined },
  ): Promise<Float32Array> {
    const reference = this.reference?.length === flat.length ? this.reference : undefined;
    const out = await robustAllreduce(comm, flat, this.aggregation, {
      name: o.name,
      timeoutMs: o.timeoutMs,
      reference,
    });
    // Kept before scaling: the next step's contributions are compared with this step's aggregate of the same kind.
    if (this.aggregation.rule === 'centered-clip') this.next = out;
    return out;
  }

  /** The step's checks passed: its aggregate becomes the next step's reference. */
  stepPassed(): void {
    if (this.next) [this.reference, this.next] = [this.next, null];
  }

  ringReformed(): void {
    this.reference = null;
    this.next = null;
  }
}
