/**
 * Backward overlapped with the allreduce, as PyTorch DDP does it: the model
 * reads its gradients back in buckets from the last layer backward
 * (GraphModel.forwardBackwardBuckets), and each bucket's reduction starts as
 * soon as it is read, while the GPU still computes the buckets before it.
 * The reducer decides once whether a job's steps take this path
 * (overlap-plan.ts); the rest of the step (the checks' `after`, the finite
 * check, the update) runs on the whole reduced buffer as it always does.
 *
 * Every bucket is reduced in place in one flat array, under a name of its own
 * that stays the same step after step, so from the second step on every bucket
 * goes ahead on the response cache.
 */
import type { Communicator } from '../../comm/interface.ts';
import { now } from '../../core/events.ts';
import type { GradientBucket } from '../../engine/grad-buckets.ts';
import { DEFAULT_BUDGET } from '../../comm/budget.ts';

export interface BucketReduction {
  comm: Communicator;
  /** In the order the model reads them (from the end of the layout). */
  buckets: readonly GradientBucket[];
  /** This rank's weight: each bucket is scaled by it as it arrives, as the whole gradient would be. */
  weight: number;
  /** Where the buckets land (the whole flat buffer), reduced in place. */
  flat: Float32Array;
  /**
   * Whether each bucket's reduction starts as soon as it is read. False on a rank whose checks may
   * change its own contribution (a caller's transform): it reads every bucket and runs `prepare`
   * first, then reduces the same buckets, in the same order, as the ranks that overlap.
   */
  overlap: boolean;
  /** Overlapping, a copy of this rank's contribution for the checks (null: none reads it); `flat` holds sums by the time the last bucket is read. */
  local: Float32Array | null;
  /** Overlapping, each bucket as read for the checks that keep a digest of the contribution instead of its copy. */
  digestBucket?: (offset: number, values: Float32Array) => void;
  /** Not overlapping: runs once every bucket is in `flat`, before any is reduced (the checks that change the contribution). */
  prepare(): Promise<void>;
  /**
   * Runs once every bucket is read, before the last one's reduction starts (the checks that only
   * read, whose own collectives thus begin between the same two buckets on every rank).
   */
  beforeLast(): Promise<void>;
  /** The gradient's collective name; bucket i of n (n > 1) is reduced as `${name} bucket i/n`. */
  name: string;
  reduce(values: Float32Array, name: string): Promise<unknown>;
}

/**
 * Reads every bucket and reduces it, each as soon as it is read when overlapping; resolves when all
 * are reduced. Collectives begin in one order on every rank, overlapping or not (negotiation
 * matches them by it): buckets 1 to n-1, `beforeLast`'s, bucket n.
 */
export async function reduceBucketsAsRead(r: BucketReduction): Promise<void> {
  const { comm, buckets, flat, local } = r;
  const n = buckets.length;
  const started: Promise<unknown>[] = [];
  const window = new ReductionWindow();
  const start = (i: number) => {
    const b = buckets[i];
    window.start(b.length * Float32Array.BYTES_PER_ELEMENT, () => {
      const done = r.reduce(
        flat.subarray(b.offset, b.offset + b.length),
        n === 1 ? r.name : `${r.name} bucket ${i + 1}/${n}`,
      );
      // Awaited below; a bucket that fails while later ones are still being read must not go unhandled meanwhile.
      done.catch(() => {});
      started.push(done);
      return done;
    });
  };
  for (const [i, b] of buckets.entries()) {
    const waited = now();
    const values = await b.ready;
    // One span per read-back: on the timeline the later ones sit beside the earlier buckets' reductions.
    if (comm.events.active)
      comm.events.emit({
        type: 'gpu-wait',
        t: waited,
        rank: comm.rank,
        what: n === 1 ? 'gradients' : `gradients bucket ${i + 1}/${n}`,
        ms: now() - waited,
        bucket: [i + 1, n],
      });
    if (r.weight !== 1) for (let k = 0; k < values.length; k++) values[k] *= r.weight;
    // A model that read the bucket into its place (Model.forwardBackwardBuckets's `into`) left nothing to copy.
    if (values.buffer !== flat.buffer) flat.set(values, b.offset);
    if (!r.overlap) continue;
    local?.set(values, b.offset);
    r.digestBucket?.(b.offset, values);
    if (i < n - 1) start(i);
  }
  if (!r.overlap) {
    await r.prepare();
    for (let i = 0; i < n - 1; i++) start(i);
  }
  // The checks' collectives begin after buckets 1 to n-1 on every rank: wait until those have begun.
  await window.allStarted();
  await r.beforeLast();
  start(n - 1);
  await window.allStarted();
  await Promise.all(started);
}

/**
 * The most bytes of bucket reductions in flight at once (one always may be). A peer runs ahead of
 * this rank by what is in flight, and what it sends before this rank asks for it waits in the
 * communicator's budget for early messages (comm/budget.ts, 64 MiB): GPT-2 124M's 14 buckets of
 * 36 MB in flight at once overran it. Half the budget leaves room for the step checks' messages
 * beside them; a small model's buckets all fit, and go side by side.
 */
export const IN_FLIGHT_BYTES = DEFAULT_BUDGET.maxBytes / 2;

/** Starts reductions in the order asked (every rank's order), each once those in flight leave room for it. */
class ReductionWindow {
  private gate: Promise<void> = Promise.resolve();
  private bytes = 0;
  private readonly running = new Set<Promise<void>>();

  start(bytes: number, begin: () => Promise<unknown>): void {
    this.gate = this.gate.then(async () => {
      while (this.running.size > 0 && this.bytes + bytes > IN_FLIGHT_BYTES) await Promise.race(this.running);
      this.bytes += bytes;
      const settled: Promise<void> = begin().then(
        () => this.finish(settled, bytes),
        () => this.finish(settled, bytes),
      );
      this.running.add(settled);
    });
  }

  allStarted(): Promise<void> {
    return this.gate;
  }

  private finish(settled: Promise<void>, bytes: number): void {
    this.bytes -= bytes;
    this.running.delete(settled);
  }
}
