import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { EventBus, now } from '../core/events.ts';
import { lossClaim, readAbortNote } from './abort-note.ts';
import { DEFAULT_BUDGET, UnconsumedBudget, type BudgetLimits } from './budget.ts';
import { decodeFrame, encodeFrames, FrameKind, Reassembler, tagKey } from './frame.ts';
import type { Communicator, Tag } from './interface.ts';
import type { Link } from './link.ts';

export type { Communicator } from './interface.ts';

export interface CommunicatorOptions {
  events?: EventBus;
  /** Send a heartbeat to a quiet peer this often (ms). */
  heartbeatMs?: number;
  /** A peer silent this long (ms) is lost; 0 turns heartbeats off (memory links report closes directly). */
  peerTimeoutMs?: number;
  /** Stop handing frames to a link while this many bytes wait in its buffer (4 MiB; libwebrtc's hard limit is 16 MiB). */
  highWaterBytes?: number;
  /** How often (ms) a blocked sender looks at bufferedAmount again. */
  pollMs?: number;
  /** What one peer may leave here unconsumed before it counts as flooding (budget.ts). */
  budget?: Partial<BudgetLimits>;
}

const DEFAULTS = {
  heartbeatMs: 500,
  // A peer that exits or crashes is reported at once (its link closes, the server sees its socket go);
  // this only catches one that is alive but silent. Software adapters compile shaders for seconds with
  // the event loop blocked, and 5 s dropped healthy peers on a loaded 2-core machine: 15 s does not.
  peerTimeoutMs: 15_000,
  highWaterBytes: 4 << 20,
  pollMs: 2,
};

interface Waiter {
  peer: number;
  resolve(p: Uint8Array): void;
  reject(e: RingtrainError): void;
  timer?: ReturnType<typeof setTimeout>;
}

/** Longest pause between two readings of a full buffer (ms). libwebrtc closes a channel past 16 MiB queued. */
const MAX_POLL_MS = 16;

/** How long close() waits for its goodbyes to be acknowledged before it cuts the links. */
const CLOSE_TIMEOUT_MS = 5000;
/** Goodbye frames: chunk 0 says "I am leaving", chunk 1 acknowledges one. */
const GOODBYE = 0;
const GOODBYE_ACK = 1;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A Communicator over one Link per other rank (a full mesh). */
export class LinkCommunicator implements Communicator {
  readonly events: EventBus;
  readonly stats = { bytesSent: 0, bytesReceived: 0 };
  private opts: typeof DEFAULTS;
  private arrived = new Map<string, Uint8Array>();
  private waiters = new Map<string, Waiter>();
  private sendChains = new Map<number, Promise<void>>();
  private reassemblers = new Map<number, Reassembler>();
  private lastHeard = new Map<number, number>();
  /** Peers already reported as going quiet in their current silence. */
  private quietReported = new Set<number>();
  private lastSent = new Map<number, number>();
  /** Upper bound on bytes waiting in each link's buffer (last reading plus what we queued since). */
  private queuedEstimate = new Map<number, number>();
  /** Ranks that closed cleanly, with the reason to give anyone still waiting on them. */
  private departed = new Map<number, RingtrainError>();
  private heartbeat?: ReturnType<typeof setInterval>;
  private lastTick = now();
  private idCounter = 0;
  /** Set by close(): new operations fail with it; queued bytes still leave. */
  private closedError: RingtrainError | null = null;
  private closing: Promise<void> | null = null;
  private goodbyeAcks = new Map<number, () => void>();
  private budget: UnconsumedBudget;
  /** Peers that broke the rules: reported once, and nothing more from them is kept. */
  private misbehaving = new Set<number>();
  /** Peers another rank reported flooding, not yet backed by evidence of our own (backed as soon as there is some). */
  private floodHearsay = new Map<number, number>();
  /**
   * Ranks that told us in their own name that a rank went away: rank → the claim (abort-note.ts,
   * lossClaim). session.ts reports them if the server then sees no one leave.
   */
  readonly lossClaims = new Map<number, string>();
  error: RingtrainError | null = null;

  constructor(
    readonly rank: number,
    readonly size: number,
    private links: Map<number, Link>,
    options: CommunicatorOptions = {},
  ) {
    if (!Number.isInteger(size) || size < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `ring size ${size} is not a positive integer`);
    }
    if (!Number.isInteger(rank) || rank < 0 || rank >= size) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank} is outside 0..${size - 1}`);
    }
    for (let p = 0; p < size; p++) {
      if (p !== rank && !links.has(p)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank} has no link to rank ${p}; a communicator needs a full mesh`);
      }
    }
    this.events = options.events ?? new EventBus();
    const { budget, ...rest } = options;
    this.opts = { ...DEFAULTS, ...stripUndefined(rest) };
    this.budget = new UnconsumedBudget({ ...DEFAULT_BUDGET, ...stripUndefined(budget ?? {}) });
    const t = now();
    for (const [peer, link] of links) {
      this.reassemblers.set(peer, new Reassembler());
      this.lastHeard.set(peer, t);
      this.lastSent.set(peer, t);
      link.onMessage((m) => this.onMessage(peer, m));
      link.onClose((reason) => this.onLinkClosed(peer, reason));
    }
    if (this.opts.peerTimeoutMs > 0 && links.size > 0) {
      this.heartbeat = setInterval(() => this.tick(), this.opts.heartbeatMs);
      (this.heartbeat as { unref?: () => void }).unref?.();
    }
  }

  nextId(): number {
    return this.idCounter++;
  }

  send(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    const failed = this.unusable(peer);
    if (failed) return Promise.reject(failed);
    const frames = encodeFrames(FrameKind.Data, tag, payload);
    const prev = this.sendChains.get(peer) ?? Promise.resolve();
    const next = prev.then(() => this.write(peer, frames));
    // A failed send must not poison the chain for the abort path; the caller sees the error.
    this.sendChains.set(peer, next.catch(() => {}));
    return next;
  }

  private async write(peer: number, frames: Uint8Array[]): Promise<void> {
    const link = this.links.get(peer)!;
    for (const f of frames) {
      // Poll bufferedAmount: the bufferedamountlow event alone is not reliable (see ENVIRONMENT.md).
      // Reading it is a call into the native stack (costly with @roamhq/wrtc), so only read it
      // when what we have queued since the last reading could have filled the buffer.
      if ((this.queuedEstimate.get(peer) ?? 0) + f.byteLength > this.opts.highWaterBytes) {
        let buffered = link.bufferedAmount();
        // Back off while the buffer stays full: each reading blocks on the WebRTC thread.
        let wait = this.opts.pollMs;
        while (buffered > this.opts.highWaterBytes - f.byteLength) {
          const failed = this.blocked(peer);
          if (failed) throw failed;
          await sleep(wait);
          wait = Math.min(2 * wait, MAX_POLL_MS);
          buffered = link.bufferedAmount();
        }
        this.queuedEstimate.set(peer, buffered);
      }
      this.queuedEstimate.set(peer, (this.queuedEstimate.get(peer) ?? 0) + f.byteLength);
      const failed = this.blocked(peer);
      if (failed) throw failed;
      try {
        link.send(f);
      } catch (e) {
        const err = new RingtrainError(ErrorCode.PeerLost, `sending to rank ${peer} failed (${(e as Error).message}); the ring is broken, rebuild it`, { peer, rank: this.rank });
        this.lose(peer, String((e as Error).message));
        throw this.error ?? err;
      }
      this.stats.bytesSent += f.byteLength;
      this.lastSent.set(peer, now());
    }
  }

  recv(peer: number, tag: Tag, timeoutMs = 0): Promise<Uint8Array> {
    const key = `${peer}|${tagKey(tag)}`;
    const have = this.arrived.get(key);
    if (have) {
      this.arrived.delete(key);
      this.budget.release(peer, have.byteLength);
      return Promise.resolve(have);
    }
    const failed = this.unusable(peer);
    if (failed) return Promise.reject(failed);
    if (this.waiters.has(key)) {
      return Promise.reject(new RingtrainError(ErrorCode.InvalidArgument, `two receives wait for the same message ${key}; each tag is received once`));
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { peer, resolve, reject };
      if (timeoutMs > 0) {
        w.timer = setTimeout(() => {
          this.waiters.delete(key);
          reject(new RingtrainError(ErrorCode.Timeout, `rank ${this.rank} waited ${timeoutMs} ms for rank ${peer} (message ${tagKey(tag)}) and got nothing; rank ${peer} is stalled or far behind`, { waitingFor: [peer], rank: this.rank, timeoutMs }));
        }, timeoutMs);
      }
      this.waiters.set(key, w);
    });
  }

  /**
   * TESTS ONLY (worker --fault): puts `bytes` on the link to `peer` as they are, unframed,
   * so a test can play a peer that runs other code.
   */
  sendRawForTesting(peer: number, bytes: Uint8Array): void {
    this.links.get(peer)?.send(bytes);
  }

  /** TESTS ONLY: bytes waiting in the link to `peer` (a raw flood paces itself by it); -1 once the link is gone. */
  rawBufferedForTesting(peer: number): number {
    const link = this.links.get(peer);
    return link && !this.departed.has(peer) ? link.bufferedAmount() : -1;
  }

  abort(err: RingtrainError): void {
    if (this.error) return;
    this.error = err;
    // `origin`: the rank whose abort started it, kept as it is passed on, so a rank that
    // starts aborts nobody else saw the reason for can be named (session.ts).
    const detail = { ...(err.detail ?? {}), origin: typeof err.detail?.origin === 'number' ? err.detail.origin : this.rank };
    const note = new TextEncoder().encode(JSON.stringify({ code: err.code, message: err.message, detail }));
    for (const [peer, link] of this.links) {
      if (this.departed.has(peer)) continue;
      try {
        for (const f of encodeFrames(FrameKind.Abort, { id: 0, step: 0, chunk: 0 }, note)) link.send(f);
      } catch {
        // That link is already down; its own close handler reports it.
      }
    }
    for (const [key, w] of this.waiters) {
      clearTimeout(w.timer);
      w.reject(err);
      this.waiters.delete(key);
    }
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    clearInterval(this.heartbeat);
    this.closedError = this.error ?? new RingtrainError(ErrorCode.Aborted, `rank ${this.rank}'s communicator is closed`, { rank: this.rank });
    this.rejectWaiters(() => true, this.closedError);
    const goodbyes = [...this.links.keys()].filter((p) => !this.departed.has(p)).map((p) => this.sayGoodbye(p));
    this.closing = (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.all(goodbyes), new Promise<void>((r) => (timer = setTimeout(r, CLOSE_TIMEOUT_MS)))]);
      clearTimeout(timer);
      for (const link of this.links.values()) link.close();
    })();
    return this.closing;
  }

  /** Queues a goodbye behind everything already queued for `peer`; resolves when it is acknowledged or the link is gone. */
  private sayGoodbye(peer: number): Promise<void> {
    const acked = new Promise<void>((resolve) => this.goodbyeAcks.set(peer, resolve));
    const bye = encodeFrames(FrameKind.Goodbye, { id: 0, step: 0, chunk: GOODBYE }, new Uint8Array(0));
    const prev = this.sendChains.get(peer) ?? Promise.resolve();
    prev.then(() => this.write(peer, bye)).catch(() => this.goodbyeAcks.get(peer)?.());
    return acked;
  }

  /** Why an operation with `peer` cannot go ahead, or null if it can. */
  private unusable(peer: number): RingtrainError | null {
    if (this.error) return this.error;
    if (this.closedError) return this.closedError;
    if (peer === this.rank || !this.links.has(peer)) {
      return new RingtrainError(ErrorCode.InvalidArgument, `rank ${this.rank} has no link to rank ${peer} (size ${this.size})`);
    }
    return this.departed.get(peer) ?? null;
  }

  /** Why frames already queued for `peer` cannot go out (abort, or the peer left), or null. */
  private blocked(peer: number): RingtrainError | null {
    return this.error ?? this.departed.get(peer) ?? null;
  }

  private rejectWaiters(which: (w: Waiter) => boolean, err: RingtrainError): void {
    for (const [key, w] of this.waiters) {
      if (!which(w)) continue;
      clearTimeout(w.timer);
      w.reject(err);
      this.waiters.delete(key);
    }
  }

  private onMessage(peer: number, bytes: Uint8Array): void {
    this.lastHeard.set(peer, now());
    this.stats.bytesReceived += bytes.byteLength;
    // A peer that broke the rules gets nothing more kept (its flood must not grow memory).
    if (this.misbehaving.has(peer)) return;
    let f;
    try {
      f = decodeFrame(bytes);
    } catch (e) {
      return this.misbehaved(peer, `sent a malformed frame (${(e as Error).message}; both ends must run the same ringtrain version)`);
    }
    switch (f.kind) {
      case FrameKind.Heartbeat:
        return;
      case FrameKind.Goodbye:
        if (f.chunk === GOODBYE_ACK) {
          this.goodbyeAcks.get(peer)?.();
          return;
        }
        this.departed.set(peer, new RingtrainError(ErrorCode.PeerLost, `rank ${peer} closed its communicator and left the ring`, { peer, rank: this.rank }));
        this.rejectWaiters((w) => w.peer === peer, this.departed.get(peer)!);
        try {
          // Everything it sent came before this (links are ordered): tell it so.
          this.links.get(peer)!.send(GOODBYE_ACK_FRAME);
        } catch {
          // gone already
        }
        return;
      case FrameKind.Abort:
        return this.onRemoteAbort(peer, f.payload);
      case FrameKind.Data: {
        let msg;
        try {
          msg = this.reassemblers.get(peer)!.push(f);
        } catch (e) {
          return this.misbehaved(peer, `broke the framing (${(e as Error).message})`);
        }
        if (!msg) {
          const over = this.budget.check(peer, this.reassemblers.get(peer)!.pendingBytes);
          if (over) this.misbehaved(peer, over);
          return;
        }
        const key = `${peer}|${tagKey(msg.tag)}`;
        const w = this.waiters.get(key);
        if (w) {
          this.waiters.delete(key);
          clearTimeout(w.timer);
          w.resolve(msg.payload);
        } else {
          const earlier = this.arrived.get(key);
          if (earlier) this.budget.release(peer, earlier.byteLength);
          this.arrived.set(key, msg.payload);
          const over = this.budget.hold(peer, msg.payload.byteLength);
          if (over) return this.misbehaved(peer, over);
          // Another rank reported this peer flooding before it had shown it here: back that report now.
          const reporter = this.floodHearsay.get(peer);
          if (reporter !== undefined) this.backFloodReport(peer, reporter);
        }
      }
    }
  }

  /**
   * Whether `peer` left here a message for a collective id more than FAR_AHEAD_IDS beyond this
   * rank's next one. Ranks run collectives in step (each waits for the others), so an honest
   * peer is never that far ahead: such a message is for a tag nobody will wait for.
   */
  private heldFarAhead(peer: number): boolean {
    const prefix = `${peer}|`;
    for (const key of this.arrived.keys()) {
      if (key.startsWith(prefix) && Number(key.slice(prefix.length).split(':')[0]) > this.idCounter + FAR_AHEAD_IDS) return true;
    }
    return false;
  }

  /**
   * `peer` broke the rules: its fault, whatever it claims. Drop what it left here, say so
   * once (an elastic session asks the server to eject it), and fail the ring naming it.
   */
  private misbehaved(peer: number, reason: string): void {
    for (const key of [...this.arrived.keys()]) if (key.startsWith(`${peer}|`)) this.arrived.delete(key);
    this.budget.forget(peer);
    this.reassemblers.set(peer, new Reassembler());
    if (!this.misbehaving.has(peer)) {
      this.misbehaving.add(peer);
      // Said even when the ring already broke for another reason: the report is what ejects it.
      if (this.events.active) this.events.emit({ type: 'peer-misbehaved', t: now(), rank: this.rank, peer, reason });
    }
    const err = new RingtrainError(ErrorCode.PeerMisbehaved, `rank ${peer} ${reason}; a peer speaks only for itself, so rank ${peer} is named: an elastic job ejects it and goes on, otherwise resume from the recovery checkpoint without it`, {
      peer,
      culprits: [peer],
      reason,
    });
    this.abort(err);
    // Cut it off: whatever it sends next costs this rank nothing, not even the reading.
    if (!this.departed.has(peer)) {
      this.departed.set(peer, err);
      this.links.get(peer)?.close();
    }
  }

  private onRemoteAbort(peer: number, payload: Uint8Array): void {
    const note = readAbortNote(payload);
    // Weighed even when this ring already broke: which abort arrives first is a race, and
    // first-hand evidence must not be lost to it.
    const claim = lossClaim(note, peer);
    if (claim && !this.lossClaims.has(peer)) this.lossClaims.set(peer, claim);
    const code = note.code;
    const lost = note.detail.peer;
    // Another rank names a flooder: back it only with evidence of our own (what that rank left
    // here), now or as soon as there is some (the flood may reach us later, even after an abort).
    if (code === ErrorCode.PeerMisbehaved && typeof lost === 'number' && lost !== this.rank && lost !== peer && this.links.has(lost)) {
      this.floodHearsay.set(lost, peer);
      if (this.backFloodReport(lost, peer)) return;
    }
    if (this.error) return;
    // An abort said to come from this rank, which has not aborted: the sender made that up, so it is the sender's.
    const origin = typeof note.detail.origin === 'number' && note.detail.origin !== this.rank ? note.detail.origin : peer;
    const detail = { ...note.detail, rank: this.rank, reportedBy: peer, origin };
    const message =
      code === ErrorCode.PeerLost && typeof lost === 'number'
        ? `rank ${lost} went away (reported by rank ${peer}); the collective was aborted on rank ${this.rank}. Rebuild the ring to go on`
        : `rank ${peer} aborted: ${note.message ?? 'no reason given'}`;
    if (code === ErrorCode.PeerLost && typeof lost === 'number' && lost !== this.rank) this.emitLost(lost, `reported by rank ${peer}`);
    // Pass it on, so ranks that only talk to us hear it too; abort() ignores repeats.
    this.abort(new RingtrainError(code, message, detail));
  }

  /** Names `peer` for a flood `reporter` reported, if it left evidence here too; true when it did. */
  private backFloodReport(peer: number, reporter: number): boolean {
    const evidence = this.budget.overHalf(peer) ? `over half its budget (${this.budget.heldBytes(peer)} bytes)` : this.heldFarAhead(peer) ? 'messages for collectives far beyond any this ring has run' : null;
    if (!evidence) return false;
    this.floodHearsay.delete(peer);
    this.misbehaved(peer, `left ${evidence} nobody asked for, when rank ${reporter} reported it flooding`);
    return true;
  }

  private onLinkClosed(peer: number, reason?: Error): void {
    this.goodbyeAcks.get(peer)?.();
    if (this.closing || this.departed.has(peer)) return;
    this.lose(peer, reason?.message ?? 'its link closed');
  }

  private lose(peer: number, reason: string): void {
    if (this.error || this.closing) return;
    this.emitLost(peer, reason);
    this.abort(new RingtrainError(ErrorCode.PeerLost, `rank ${peer} went away (${reason}); the collective was aborted on rank ${this.rank}. Rebuild the ring to go on`, { peer, rank: this.rank, reason }));
  }

  private emitLost(peer: number, reason: string): void {
    if (this.events.active) this.events.emit({ type: 'peer-lost', t: now(), rank: this.rank, peer, reason });
  }

  private tick(): void {
    const t = now();
    // If this timer ran late the event loop was blocked, so silence proves nothing: start over.
    const late = t - this.lastTick > 3 * this.opts.heartbeatMs;
    this.lastTick = t;
    for (const [peer, link] of this.links) {
      if (this.departed.has(peer)) continue;
      if (late) this.lastHeard.set(peer, t);
      const silentMs = t - this.lastHeard.get(peer)!;
      if (silentMs > this.opts.peerTimeoutMs) {
        this.lose(peer, `silent for ${Math.round(silentMs)} ms`);
        return;
      }
      // Half-way to being dropped, say who has gone quiet: the stall inspector's early warning,
      // whatever the ring is doing (a frozen rank may hold up a collective's data, not only its negotiation).
      if (silentMs <= this.opts.peerTimeoutMs / 2) {
        this.quietReported.delete(peer); // heard from again: a later silence is news again
      } else if (!this.quietReported.has(peer)) {
        this.quietReported.add(peer);
        if (this.events.active) this.events.emit({ type: 'stall', t, rank: this.rank, id: -1, name: QUIET_LINK, waitingFor: [peer], waitedMs: silentMs });
      }
      if (t - this.lastSent.get(peer)! >= this.opts.heartbeatMs && link.bufferedAmount() < this.opts.highWaterBytes) {
        try {
          link.send(HEARTBEAT);
          this.lastSent.set(peer, t);
        } catch {
          // its close handler reports it
        }
      }
    }
  }
}

/** How far beyond this rank's next collective id a held message counts as far ahead (see heldFarAhead). */
const FAR_AHEAD_IDS = 1 << 16;

/** The `name` of a stall event that reports a silent link rather than a late collective. */
export const QUIET_LINK = '(silent link)';

const HEARTBEAT = encodeFrames(FrameKind.Heartbeat, { id: 0, step: 0, chunk: 0 }, new Uint8Array(0))[0];
const GOODBYE_ACK_FRAME = encodeFrames(FrameKind.Goodbye, { id: 0, step: 0, chunk: GOODBYE_ACK }, new Uint8Array(0))[0];

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
