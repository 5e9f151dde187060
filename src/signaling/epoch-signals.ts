/**
 * The WebRTC signals of one membership epoch, for the `Signaler`s that want
 * them. Signals are logged per epoch, so a Signaler subscribed late still sees
 * every signal of its epoch from the start (an offer may arrive before the
 * link that wants it exists). The log and the subscribers of older epochs are
 * dropped when the epoch moves on. Kept apart from the client because it is
 * the only state the client keeps on behalf of the transport.
 */

export type SignalHandler = (from: number, data: unknown) => void;

/** Signals kept per epoch for late subscribers; beyond this the oldest are dropped. */
const MAX_SIGNAL_LOG = 4096;

/** A throwing signal handler must not take the socket's message loop down with it. */
function deliver(handler: SignalHandler, from: number, data: unknown): void {
  try {
    handler(from, data);
  } catch (err) {
    console.error(`ringtrain: a signal handler threw on a signal from rank ${from}:`, err);
  }
}

export class EpochSignals {
  private log: { epoch: number; entries: { from: number; data: unknown }[] } = { epoch: -1, entries: [] };
  private handlers = new Map<number, Set<SignalHandler>>();

  /** Membership epoch `epoch` began: log its signals from now on, and forget older epochs' subscribers. */
  begin(epoch: number): void {
    this.log = { epoch, entries: [] };
    for (const e of this.handlers.keys()) if (e < epoch) this.handlers.delete(e);
  }

  /**
   * Hands `handler` every signal of `epoch`, those logged already first; returns how to stop.
   * An epoch that is neither the logged one nor `currentEpoch` is over: nothing will come.
   */
  subscribe(epoch: number, currentEpoch: number | undefined, handler: SignalHandler): () => void {
    if (epoch !== this.log.epoch && epoch !== currentEpoch) return () => {};
    let set = this.handlers.get(epoch);
    if (!set) this.handlers.set(epoch, (set = new Set()));
    set.add(handler);
    if (this.log.epoch === epoch) for (const s of [...this.log.entries]) deliver(handler, s.from, s.data);
    return () => set.delete(handler);
  }

  /** A signal from rank `from` arrived for `epoch`; one for another epoch is dropped. */
  receive(epoch: number, from: number, data: unknown): void {
    if (epoch !== this.log.epoch) return;
    const log = this.log.entries;
    log.push({ from, data });
    if (log.length > MAX_SIGNAL_LOG) log.shift();
    for (const h of [...(this.handlers.get(epoch) ?? [])]) deliver(h, from, data);
  }
}
