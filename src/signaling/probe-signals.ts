/**
 * The admission probes this peer is an end of (protocol.ts, "Staged admission"): the `probe`
 * messages, kept until the session listens (a candidate hears its probes right after its
 * welcome, before its session exists), and each probe's signals, logged from the probe's start
 * so the link that wants them may subscribe late, as epoch-signals.ts does for an epoch's ring.
 */
import type { ProbeMsg } from './protocol.ts';

/** Probes and signals kept per probe before anyone listens; beyond these the oldest are dropped. */
const MAX_EARLY_PROBES = 64;
const MAX_PROBE_SIGNALS = 1024;

type SignalHandler = (data: unknown) => void;

export class ProbeSignals {
  private early: ProbeMsg[] = [];
  private handler: ((p: ProbeMsg) => void) | null = null;
  private logs = new Map<number, { entries: unknown[]; handlers: Set<SignalHandler> }>();

  /** Hands `handler` every probe, those that came already first (one handler: the session's). */
  onProbe(handler: (p: ProbeMsg) => void): void {
    this.handler = handler;
    for (const p of this.early.splice(0)) handler(p);
  }

  /** A probe started: log its signals from now on, and hand it to the handler (or keep it). */
  started(p: ProbeMsg): void {
    this.logs.set(p.probe, { entries: [], handlers: new Set() });
    if (this.handler) return this.handler(p);
    this.early.push(p);
    if (this.early.length > MAX_EARLY_PROBES) this.logs.delete(this.early.shift()!.probe);
  }

  /** Hands `handler` every signal of probe `id`, those logged already first; returns how to stop. */
  subscribe(id: number, handler: SignalHandler): () => void {
    const log = this.logs.get(id);
    if (!log) return () => {};
    log.handlers.add(handler);
    for (const data of [...log.entries]) handler(data);
    return () => log.handlers.delete(handler);
  }

  /** A signal of probe `id` arrived; one of a probe this peer is no end of is dropped. */
  receive(id: number, data: unknown): void {
    const log = this.logs.get(id);
    if (!log) return;
    log.entries.push(data);
    if (log.entries.length > MAX_PROBE_SIGNALS) log.entries.shift();
    for (const h of [...log.handlers]) h(data);
  }

  /** Probe `id` is over (echoed, or given up): forget its log. */
  end(id: number): void {
    this.logs.delete(id);
  }
}
