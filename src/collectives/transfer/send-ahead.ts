/**
 * A ring loop's first sends need nothing from anyone, so they could all be queued at once; but
 * a queued message is copied into frames (comm/frame.ts), and queueing a whole chunk copied all
 * of it: half the tensor on two ranks, beside the tensor itself. SendAhead hands them out a
 * window ahead of what the loop has received instead. Every rank of the ring does the same, so
 * the segment a rank waits for was sent by its left neighbour at the latest when that neighbour
 * waited for an earlier one: nobody waits on a send that is held back.
 */

/** Segments (256 KiB each by default) sent ahead of the one the loop waits for: 4 MiB, enough to keep a link busy. */
export const SEND_AHEAD = 16;

export class SendAhead {
  private sent = 0;

  /** Sends the first `window` of `count` segments at once (`send(j)` queues segment j). */
  constructor(
    private readonly count: number,
    private readonly send: (j: number) => void,
    private readonly window = SEND_AHEAD,
  ) {
    this.before(-1);
  }

  /** Call before waiting for segment `j`: every segment up to `j + window` has been queued. */
  before(j: number): void {
    const end = Math.min(this.count, j + 1 + this.window);
    while (this.sent < end) this.send(this.sent++);
  }

  /** Queues what is left (the loop received fewer segments than it sends). */
  rest(): void {
    this.before(this.count);
  }
}
