/**
 * A per-peer bound on what a peer may make this rank hold: messages that
 * arrived before anyone asked for them (and fragments still being glued).
 * Early arrival is normal in a ring (a neighbour may run a step ahead), but
 * it is bounded by what one collective sends; a peer past the budget is
 * flooding, and everything it left here is dropped at once so memory stays
 * bounded whatever it sends next.
 */
export interface BudgetLimits {
  /** Bytes of unconsumed messages one peer may leave here. */
  maxBytes: number;
  /** Count of unconsumed messages one peer may leave here. */
  maxMessages: number;
}

/** 64 MiB and 64 Ki messages: far above a collective's early arrivals (a ring step's chunks), far below a tab's memory. */
export const DEFAULT_BUDGET: BudgetLimits = { maxBytes: 64 << 20, maxMessages: 65_536 };

export class UnconsumedBudget {
  private bytes = new Map<number, number>();
  private messages = new Map<number, number>();
  /** Bytes a collective under way expects from a peer (`allow`): early arrivals within them are not a flood. */
  private allowed = new Map<number, number>();

  constructor(readonly limits: BudgetLimits = DEFAULT_BUDGET) {}

  /** Counts a message held for `peer`; returns why that breaks the budget, or null. */
  hold(peer: number, byteLength: number, pendingBytes = 0): string | null {
    const b = (this.bytes.get(peer) ?? 0) + byteLength;
    const n = (this.messages.get(peer) ?? 0) + 1;
    this.bytes.set(peer, b);
    this.messages.set(peer, n);
    return this.check(peer, pendingBytes);
  }

  /** Whether `peer` is over budget counting `pendingBytes` not yet whole (fragments); reason or null. */
  check(peer: number, pendingBytes = 0): string | null {
    const b = (this.bytes.get(peer) ?? 0) + pendingBytes;
    const n = this.messages.get(peer) ?? 0;
    const maxBytes = this.limits.maxBytes + (this.allowed.get(peer) ?? 0);
    if (b > maxBytes) return `left ${b} bytes of messages nobody asked for (budget ${maxBytes})`;
    if (n > this.limits.maxMessages) return `left ${n} messages nobody asked for (budget ${this.limits.maxMessages})`;
    return null;
  }

  /**
   * A collective expects up to `bytes` from `peer` while it runs: a ring's neighbour may run up to
   * N−2 steps ahead, so a chunk of size/N can arrive before it is asked for, beyond any fixed budget
   * when the tensor is large. The allowance lasts until the returned function is called.
   */
  allow(peer: number, bytes: number): () => void {
    this.allowed.set(peer, (this.allowed.get(peer) ?? 0) + bytes);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.allowed.set(peer, Math.max(0, (this.allowed.get(peer) ?? 0) - bytes));
    };
  }

  /** A held message was consumed. */
  release(peer: number, byteLength: number): void {
    this.bytes.set(peer, Math.max(0, (this.bytes.get(peer) ?? 0) - byteLength));
    this.messages.set(peer, Math.max(0, (this.messages.get(peer) ?? 0) - 1));
  }

  /** Everything held for `peer` was dropped. */
  forget(peer: number): void {
    this.bytes.delete(peer);
    this.messages.delete(peer);
  }

  /**
   * Whether `peer` has used more than half of its budget: evidence of its own that lets a
   * rank back another rank's report of a flood (which may reach it a moment before its own
   * budget runs out), without taking that report on trust.
   */
  overHalf(peer: number): boolean {
    return (
      (this.bytes.get(peer) ?? 0) * 2 > this.limits.maxBytes ||
      (this.messages.get(peer) ?? 0) * 2 > this.limits.maxMessages
    );
  }

  heldBytes(peer: number): number {
    return this.bytes.get(peer) ?? 0;
  }
}
