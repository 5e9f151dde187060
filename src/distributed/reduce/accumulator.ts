/**
 * Gradient accumulation (backwardPassesPerStep = k): the gradients of k local
 * passes are summed here and reduced once, on the k-th, so a slow link carries
 * fewer, larger messages. The sum becomes the passes' mean through the
 * allreduce's prescale (1/k), so one step of k passes equals one pass over k
 * batches. This library's reducer and `ringtrain/tfjs`'s optimizer both sum
 * their passes here.
 */
export class GradientAccumulator {
  private sum: Float32Array | null = null;
  private passes = 0;

  constructor(readonly passesPerStep: number) {}

  /**
   * Takes one pass's gradients. Returns what is to be reduced once the k-th pass is in (the sum,
   * or with k = 1 the gradients themselves), null while passes are still being summed.
   */
  add(grads: Float32Array): Float32Array | null {
    if (this.passesPerStep === 1) return grads;
    if (this.sum?.length !== grads.length) this.sum = new Float32Array(grads.length);
    const sum = this.sum;
    for (let i = 0; i < grads.length; i++) sum[i] += grads[i];
    this.passes++;
    return this.passes < this.passesPerStep ? null : sum;
  }

  /** Whether the next pass taken is the step's k-th, the one that is reduced (always, for one pass a step). */
  get nextPassEndsStep(): boolean {
    return this.passes + 1 >= this.passesPerStep;
  }

  /** What turns the reduced sum of k passes into their mean: 1/k, undefined for one pass. */
  get prescale(): number | undefined {
    return this.passesPerStep > 1 ? 1 / this.passesPerStep : undefined;
  }

  /**
   * Drops what was summed: after a step's update (the sum may be the reduced gradient the update
   * just read, so never before), and after a failed step, before it is taken again.
   */
  reset(): void {
    this.sum?.fill(0);
    this.passes = 0;
  }
}
