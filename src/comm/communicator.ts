/**
 * The `Communicator` collectives run on, over one `Link` per other rank (a
 * full mesh). This file is its message path and its rules of conduct:
 * framing and backpressure on the way out, frames sorted by kind on the way
 * in, an abort that reaches every rank, a goodbye that loses nothing, and
 * the judgement of a peer that breaks the rules. What waits to be received
 * lives in inbox.ts, the heartbeat in liveness.ts, the knobs in
 * communicator-options.ts.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { EventBus, now, type LinkTransport } from '../core/events.ts';
import { lossClaim, readAbortNote, relayedAbort, writeAbortNote } from './abort-note.ts';
import { UnconsumedBudget } from './budget.ts';
import { withDefaults, type CommunicatorOptions, type CommunicatorSettings } from './communicator-options.ts';
import { decodeFrame, encodeFrames, FrameKind, frameParts, Reassembler, type FrameParts } from './frame.ts';
import { Inbox } from './inbox.ts';
import type { Communicator, Tag } from './interface.ts';
import type { Link } from './link.ts';
import type { MisbehaviourSink } from './misbehaviour.ts';
import { LinkLiveness } from './liveness.ts';

export type { Communicator } from './interface.ts';
export type { CommunicatorOptions } from './communicator-options.ts';
export { QUIET_LINK } from './liveness.ts';

/** Longest pause between two readings of a full buffer (ms). libwebrtc closes a channel past 16 MiB queued. */
const MAX_POLL_MS = 16;

/** Longest wait on a link's own drain signal before the sender looks whether the ring was aborted meanwhile. */
const ROOM_WAIT_MS = 100;

/** How long close() waits for its goodbyes to be acknowledged before it cuts the links. */
const CLOSE_TIMEOUT_MS = 5000;
/** How long close() lets bytes still queued for a peer that broke the rules drain (it sends no acknowledgement to wait for). */
const DRAIN_TIMEOUT_MS = 1000;
/** Relay proofs kept per ring: one per rank that caught a relayer is plenty; a flood of notes keeps no more. */
const MAX_RELAY_PROOFS = 8;
/** Goodbye frames: chunk 0 says "I am leaving", chunk 1 acknowledges one. */
const GOODBYE = 0;
const GOODBYE_ACK = 1;
const GOODBYE_ACK_FRAME = encodeFrames(FrameKind.Goodbye, { id: 0, step: 0, chunk: GOODBYE_ACK }, new Uint8Array(0))[0];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What goes on a link: a whole frame (copied), or a header and a payload written where it lies. */
type OutFrame = Uint8Array | FrameParts;

/** A Communicator over one Link per other rank (a full mesh). */
export class LinkCommunicator implements Communicator {
  readonly events: EventBus;
  readonly stats = { bytesSent: 0, bytesReceived: 0 };
  private opts: CommunicatorSettings;
  private inbox: Inbox;
  private liveness: LinkLiveness;
  private sendChains = new Map<number, Promise<void>>();
  private reassemblers = new Map<number, Reassembler>();
  /** Upper bound on bytes waiting in each link's buffer (last reading plus what we queued since). */
  private queuedEstimate = new Map<number, number>();
  /** Ranks that closed cleanly, with the reason to give anyone still waiting on them. */
  private departed = new Map<number, RingtrainError>();
  private idCounter = 0;
  /** Set by close(): new operations fail with it; queued bytes still leave. */
  private closedError: RingtrainError | null = null;
  private closing: Promise<void> | null = null;
  private goodbyeAcks = new Map<number, () => void>();
  /** Peers that broke the rules: reported once, and nothing more from them is kept. */
  private misbehaving = new Set<number>();
  /** Peers this rank found gone (silent past the timeout, link down): no goodbye is owed them. */
  private gone = new Set<number>();
  /** Peers another rank reported flooding, not yet backed by evidence of our own (backed as soon as there is some). */
  private floodHearsay = new Map<number, number>();
  /**
   * Ranks that told us in their own name that a rank went away: rank → the claim (abort-note.ts,
   * lossClaim). session.ts reports them if the server then sees no one leave.
   */
  readonly lossClaims = new Map<number, string>();
  /** For each rank in lossClaims, the rank it said went away. */
  readonly claimedLost = new Map<number, number>();
  /**
   * Proofs against a relayer that rewrote a signed check, as other ranks' abort notes carried them
   * (`detail.relayProof`), kept whichever abort came first: the session checks them (signed-gather.ts).
   */
  readonly relayProofs: unknown[] = [];
  error: RingtrainError | null = null;
  private readonly misbehaviour: MisbehaviourSink | undefined;

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
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `rank ${rank} has no link to rank ${p}; a communicator needs a full mesh`,
        );
      }
    }
    this.events = options.events ?? new EventBus();
    this.misbehaviour = options.misbehaviour;
    const { settings, budget } = withDefaults(options);
    this.opts = settings;
    this.inbox = new Inbox(rank, new UnconsumedBudget(budget));
    this.liveness = new LinkLiveness(rank, links, settings, this.events, {
      departed: (peer) => this.departed.has(peer),
      lose: (peer, reason) => this.lose(peer, reason),
    });
    for (const [peer, link] of links) {
      this.reassemblers.set(peer, this.reassemblerFor(peer));
      link.onMessage((m) => this.onMessage(peer, m));
      link.onClose((reason) => this.onLinkClosed(peer, reason));
    }
    this.liveness.start();
  }

  /** What carries each link (LinkTransport), in rank order; 'memory' for in-process links that do not say. */
  linkTransports(): LinkTransport[] {
    return [...this.links]
      .sort(([a], [b]) => a - b)
      .map(([peer, link]) => ({ peer, transport: link.transport ?? 'memory' }));
  }

  nextId(): number {
    return this.idCounter++;
  }

  send(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    const failed = this.unusable(peer);
    if (failed) return Promise.reject(failed);
    const link = this.links.get(peer)!;
    const frames = link.messageBuffer
      ? encodeFrames(FrameKind.Data, tag, payload, (n) => link.messageBuffer!(n))
      : encodeFrames(FrameKind.Data, tag, payload);
    return this.queue(peer, frames);
  }

  lend(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    if (!this.links.get(peer)?.sendInPlace) return this.send(peer, tag, payload);
    const failed = this.unusable(peer);
    if (failed) return Promise.reject(failed);
    const taken: Promise<void>[] = [];
    return this.queue(peer, frameParts(FrameKind.Data, tag, payload), taken).then(async () => {
      try {
        await Promise.all(taken);
      } catch (e) {
        // The link went down before it sent what it was lent: as a send that fails at once.
        const err = this.sendFailed(peer, e);
        this.lose(peer, String((e as Error).message));
        throw this.error ?? err;
      }
    });
  }

  /** Queues frames for `peer` behind what is queued already; `taken` collects the promises of frames written in place. */
  private queue(peer: number, frames: OutFrame[], taken?: Promise<void>[]): Promise<void> {
    const prev = this.sendChains.get(peer) ?? Promise.resolve();
    const next = prev.then(() => this.write(peer, frames, taken));
    // A failed send must not poison the chain for the abort path; the caller sees the error.
    this.sendChains.set(
      peer,
      next.catch(() => {}),
    );
    return next;
  }

  private async write(peer: number, frames: OutFrame[], taken?: Promise<void>[]): Promise<void> {
    const link = this.links.get(peer)!;
    for (const f of frames) {
      const bytes = f instanceof Uint8Array ? f.byteLength : f.head.byteLength + f.body.byteLength;
      if ((this.queuedEstimate.get(peer) ?? 0) + bytes > this.opts.highWaterBytes)
        await this.roomFor(peer, link, bytes);
      this.queuedEstimate.set(peer, (this.queuedEstimate.get(peer) ?? 0) + bytes);
      const failed = this.blocked(peer);
      if (failed) throw failed;
      try {
        if (f instanceof Uint8Array) link.send(f);
        else taken!.push(link.sendInPlace!(f.head, f.body));
      } catch (e) {
        const err = this.sendFailed(peer, e);
        this.lose(peer, String((e as Error).message));
        throw this.error ?? err;
      }
      this.stats.bytesSent += bytes;
      this.liveness.sent(peer);
    }
  }

  /**
   * Waits while `peer`'s link holds more than the high-water mark would allow with `bytes` more.
   * Called only when what was queued since the last reading could have filled the buffer: reading
   * bufferedAmount is a call into the native stack (costly with @roamhq/wrtc). It is polled, as the
   * bufferedamountlow event alone is not reliable (see ENVIRONMENT.md).
   */
  private async roomFor(peer: number, link: Link, bytes: number): Promise<void> {
    let buffered = link.bufferedAmount();
    // Back off while the buffer stays full: each reading blocks on the WebRTC thread.
    let wait = this.opts.pollMs;
    while (buffered > this.opts.highWaterBytes - bytes) {
      const failed = this.blocked(peer);
      if (failed) throw failed;
      // A link that says when it drained is waited on (bounded, so an abort is seen); the rest are polled.
      if (link.waitForRoom) await link.waitForRoom(ROOM_WAIT_MS);
      else await sleep(wait);
      wait = Math.min(2 * wait, MAX_POLL_MS);
      buffered = link.bufferedAmount();
    }
    this.queuedEstimate.set(peer, buffered);
  }

  private sendFailed(peer: number, e: unknown): RingtrainError {
    return new RingtrainError(
      ErrorCode.PeerLost,
      `sending to rank ${peer} failed (${(e as Error).message}); the ring is broken, rebuild it`,
      { peer, rank: this.rank },
    );
  }

  forget(id: number, step: (step: number) => boolean): void {
    this.inbox.forget(id, step);
  }

  recv(peer: number, tag: Tag, timeoutMs = 0): Promise<Uint8Array> {
    const have = this.inbox.take(peer, tag);
    if (have) return Promise.resolve(have);
    const failed = this.unusable(peer);
    if (failed) return Promise.reject(failed);
    return this.inbox.wait(peer, tag, timeoutMs);
  }

  release(peer: number, payload: Uint8Array): void {
    this.links.get(peer)?.recycle?.(payload);
  }

  expect(peer: number, bytes: number): () => void {
    return this.inbox.budget.allow(peer, bytes);
  }

  /** Glues `peer`'s fragments; a glued fragment goes back to its link, which may reuse its buffer. */
  private reassemblerFor(peer: number): Reassembler {
    const link = this.links.get(peer)!;
    return new Reassembler(link.recycle ? (fragment) => link.recycle!(fragment) : undefined);
  }

  /**
   * The transport under this communicator's messages to `peer` (undefined for itself or a rank
   * it has no link to), as gloo exposes its pairs: what goes on it bypasses framing and tags.
   */
  linkTo(peer: number): Link | undefined {
    return this.links.get(peer);
  }

  abort(err: RingtrainError): void {
    if (this.error) return;
    this.error = err;
    // A closing communicator's goodbyes, queued behind its data, already tell every peer; an abort
    // note goes out at once and would overtake data the peers still need to finish what this rank
    // completed (a collective of its own failing as the close rejects it lands here).
    if (!this.closing) this.sendAbortNotes(err);
    this.inbox.rejectWaiters(() => true, err);
  }

  private sendAbortNotes(err: RingtrainError): void {
    const note = writeAbortNote(err, this.rank);
    for (const [peer, link] of this.links) {
      if (this.departed.has(peer)) continue;
      try {
        for (const f of encodeFrames(FrameKind.Abort, { id: 0, step: 0, chunk: 0 }, note)) link.send(f);
      } catch {
        // That link is already down; its own close handler reports it.
      }
    }
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.liveness.stop();
    this.closedError =
      this.error ??
      new RingtrainError(ErrorCode.Aborted, `rank ${this.rank}'s communicator is closed`, { rank: this.rank });
    this.inbox.rejectWaiters(() => true, this.closedError);
    // No goodbye to a peer that is gone (its acknowledgement would not come), nor to one that broke the
    // rules (nothing it sends is read, its acknowledgement included).
    const goodbyes = [...this.links.keys()]
      .filter((p) => !this.departed.has(p) && !this.gone.has(p) && !this.misbehaving.has(p))
      .map((p) => this.sayGoodbye(p));
    // What this rank still owes a peer that broke the rules leaves before its link is cut: the step
    // checks name it on every rank from the same gathered numbers, but a rank that got its numbers
    // first must not cut off the last forwards the others' copies still need from that peer.
    const drains = [...this.links.keys()]
      .filter((p) => this.misbehaving.has(p) && !this.gone.has(p))
      .map((p) => this.drained(p));
    this.closing = (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      let drainTimer: ReturnType<typeof setTimeout> | undefined;
      const drainedOrLate = Promise.race([
        Promise.all(drains),
        new Promise<void>((r) => (drainTimer = setTimeout(r, DRAIN_TIMEOUT_MS))),
      ]);
      await Promise.race([
        Promise.all([...goodbyes, drainedOrLate]),
        new Promise<void>((r) => (timer = setTimeout(r, CLOSE_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
      clearTimeout(drainTimer);
      for (const link of this.links.values()) link.close();
    })();
    return this.closing;
  }

  /**
   * Queues a goodbye behind everything already queued for `peer`; resolves when it is acknowledged or the link is gone.
   * Said on an aborted ring too (its queued data no longer goes, but the goodbye does): the acknowledgement
   * comes after everything the peer sent before it (links are ordered), so closing at once, as a regroup does,
   * does not cut off what is still on its way, such as a forger's own abort arriving after another rank's relay
   * of it (the first-hand evidence onRemoteAbort keeps).
   */
  private sayGoodbye(peer: number): Promise<void> {
    const acked = new Promise<void>((resolve) => this.goodbyeAcks.set(peer, resolve));
    const bye = encodeFrames(FrameKind.Goodbye, { id: 0, step: 0, chunk: GOODBYE }, new Uint8Array(0));
    const prev = this.sendChains.get(peer) ?? Promise.resolve();
    prev
      .then(() => (this.error ? this.links.get(peer)!.send(bye[0]) : this.write(peer, bye)))
      .catch(() => this.goodbyeAcks.get(peer)?.());
    return acked;
  }

  /** Resolves once everything queued for `peer` has been handed to its link and its buffer is empty (or the link failed). */
  private async drained(peer: number): Promise<void> {
    await (this.sendChains.get(peer) ?? Promise.resolve());
    const link = this.links.get(peer)!;
    try {
      while (link.bufferedAmount() > 0) await sleep(MAX_POLL_MS);
    } catch {
      // The link is down: nothing more leaves by it.
    }
  }

  /** Why an operation with `peer` cannot go ahead, or null if it can. */
  private unusable(peer: number): RingtrainError | null {
    if (this.error) return this.error;
    if (this.closedError) return this.closedError;
    if (peer === this.rank || !this.links.has(peer)) {
      return new RingtrainError(
        ErrorCode.InvalidArgument,
        `rank ${this.rank} has no link to rank ${peer} (size ${this.size})`,
      );
    }
    return this.departed.get(peer) ?? null;
  }

  /** Why frames already queued for `peer` cannot go out (abort, or the peer left), or null. */
  private blocked(peer: number): RingtrainError | null {
    return this.error ?? this.departed.get(peer) ?? null;
  }

  private onMessage(peer: number, bytes: Uint8Array): void {
    this.liveness.heard(peer);
    this.stats.bytesReceived += bytes.byteLength;
    // A peer that broke the rules gets nothing more kept (its flood must not grow memory).
    if (this.misbehaving.has(peer)) return;
    let f;
    try {
      f = decodeFrame(bytes);
    } catch (e) {
      return this.misbehaved(
        peer,
        `sent a malformed frame (${(e as Error).message}; both ends must run the same ringtrain version)`,
      );
    }
    switch (f.kind) {
      case FrameKind.Heartbeat:
        return;
      case FrameKind.Goodbye:
        if (f.chunk === GOODBYE_ACK) {
          this.goodbyeAcks.get(peer)?.();
          return;
        }
        this.departed.set(
          peer,
          new RingtrainError(ErrorCode.PeerLost, `rank ${peer} closed its communicator and left the ring`, {
            peer,
            rank: this.rank,
          }),
        );
        this.inbox.rejectWaiters((w) => w.peer === peer, this.departed.get(peer)!);
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
          const over = this.inbox.budget.check(peer, this.reassemblers.get(peer)!.pendingBytes);
          if (over) this.misbehaved(peer, over);
          return;
        }
        const { held, over } = this.inbox.deliver(peer, msg.tag, msg.payload);
        if (over) return this.misbehaved(peer, over);
        if (held) {
          // Another rank reported this peer flooding before it had shown it here: back that report now.
          const reporter = this.floodHearsay.get(peer);
          if (reporter !== undefined) this.backFloodReport(peer, reporter);
        }
      }
    }
  }

  /**
   * `peer` broke the rules: its fault, whatever it claims. Drop what it left here, say so
   * once (an elastic session asks the server to eject it), and fail the ring naming it.
   */
  private misbehaved(peer: number, reason: string): void {
    this.inbox.drop(peer);
    this.reassemblers.set(peer, this.reassemblerFor(peer));
    if (!this.misbehaving.has(peer)) {
      this.misbehaving.add(peer);
      // Said even when the ring already broke for another reason: the report is what ejects it.
      this.misbehaviour?.peerMisbehaved({ rank: this.rank, peer, reason });
      if (this.events.active) this.events.emit({ type: 'peer-misbehaved', t: now(), rank: this.rank, peer, reason });
    }
    const err = new RingtrainError(
      ErrorCode.PeerMisbehaved,
      `rank ${peer} ${reason}; a peer speaks only for itself, so rank ${peer} is named: an elastic job ejects it and goes on, otherwise resume from the recovery checkpoint without it`,
      {
        peer,
        culprits: [peer],
        reason,
      },
    );
    // The link stays open until the ring closes (frames from it are dropped unread): node-webrtc
    // has crashed the process (SIGSEGV in wrtc.node) when a channel was destroyed mid-flood.
    this.abort(err);
  }

  private onRemoteAbort(peer: number, payload: Uint8Array): void {
    const note = readAbortNote(payload);
    // Weighed even when this ring already broke: which abort arrives first is a race, and
    // first-hand evidence must not be lost to it.
    if (note.detail.relayProof !== undefined && this.relayProofs.length < MAX_RELAY_PROOFS)
      this.relayProofs.push(note.detail.relayProof);
    const claim = lossClaim(note, peer);
    if (claim && !this.lossClaims.has(peer)) {
      this.lossClaims.set(peer, claim);
      this.claimedLost.set(peer, note.detail.peer as number);
    }
    const code = note.code;
    const lost = note.detail.peer;
    // Another rank names a flooder: back it only with evidence of our own (what that rank left
    // here), now or as soon as there is some (the flood may reach us later, even after an abort).
    if (
      code === ErrorCode.PeerMisbehaved &&
      typeof lost === 'number' &&
      lost !== this.rank &&
      lost !== peer &&
      this.links.has(lost)
    ) {
      this.floodHearsay.set(lost, peer);
      if (this.backFloodReport(lost, peer)) return;
    }
    if (this.error) return;
    const relayed = relayedAbort(note, peer, this.rank);
    if (code === ErrorCode.PeerLost && typeof lost === 'number' && lost !== this.rank)
      this.emitLost(lost, `reported by rank ${peer}`);
    // Pass it on, so ranks that only talk to us hear it too; abort() ignores repeats.
    this.abort(relayed);
  }

  /** Names `peer` for a flood `reporter` reported, if it left evidence here too; true when it did. */
  private backFloodReport(peer: number, reporter: number): boolean {
    const budget = this.inbox.budget;
    const evidence = budget.overHalf(peer)
      ? `over half its budget (${budget.heldBytes(peer)} bytes)`
      : this.inbox.heldFarAhead(peer, this.idCounter)
        ? 'messages for collectives far beyond any this ring has run'
        : null;
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
    this.gone.add(peer);
    if (this.error || this.closing) return;
    this.emitLost(peer, reason);
    this.abort(
      new RingtrainError(
        ErrorCode.PeerLost,
        `rank ${peer} went away (${reason}); the collective was aborted on rank ${this.rank}. Rebuild the ring to go on`,
        { peer, rank: this.rank, reason },
      ),
    );
  }

  private emitLost(peer: number, reason: string): void {
    if (this.events.active) this.events.emit({ type: 'peer-lost', t: now(), rank: this.rank, peer, reason });
  }
}
