import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now, type Phase } from '../../core/events.ts';
import { lendOrSend, type Communicator, type Tag } from '../../comm/interface.ts';
import { fingerprintIntact, sameBytes } from './cache.ts';
import { FAST_STEP_BIT } from './negotiate.ts';
import type { Range } from '../codecs/partition.ts';
import { DEFAULT_SEGMENT_BYTES, DEFAULT_TIMEOUT_MS, type CollectiveOptions, type Tensor } from '../codecs/types.ts';
import type { Codec } from '../codecs/wire.ts';

/**
 * Why a collective that went ahead on its cached agreement stops and
 * negotiates instead. Thrown inside its body (every pending receive rejects
 * with it); never seen by callers.
 */
export class Fallback extends Error {
  /** `tell`: this rank found it out itself, so it tells the others (they may be waiting on it). */
  constructor(
    why: string,
    readonly tell: boolean,
  ) {
    super(why);
  }
}

/** Bytes of the cached agreement's fingerprint in front of the first message to each peer (cache.ts). */
const FINGERPRINT_BYTES = 12;

interface FastState {
  fingerprint: Uint8Array;
  sentTo: Set<number>;
  heardFrom: Set<number>;
  fallen: Fallback | null;
  /** Every rank has shown it went ahead on this same agreement (see `agreed`). */
  agreed: boolean;
  /** The data is checked after the collective (a verified reduction): a damaged fingerprint goes on (Run.recv). */
  checkedAfter: boolean;
  /**
   * The receives waiting now, each rejected with the Fallback once there is one. Not a race
   * against one promise that lives as long as the run: each race leaves a reaction on it that
   * holds the payload it won, so a collective held everything it received until it ended.
   */
  waiting: Set<(f: Fallback) => void>;
  fail(f: Fallback): void;
}

/**
 * One collective in flight on one rank: its id, its options, the events it
 * emits and the sends it has queued. Every collective function goes through
 * `runCollective`, which agrees on it with the others first (from the
 * response cache, or through the coordinator) and makes sure a failure while
 * data moves aborts the communicator (so no other rank is left waiting).
 *
 * On the fast path (a cache hit) the data moves at once: the first message
 * to each peer starts with the cached agreement's fingerprint, and the first
 * message from each peer is checked against ours. Every collective allowed
 * on that path makes each rank's result depend on data from every rank
 * through such checked links, so all pairs equal along the way means all
 * equal, and a rank that misses (it sends no data) or finds a difference
 * holds everyone up until they hear of it and negotiate.
 */
export class Run {
  readonly timeoutMs: number;
  readonly segmentBytes: number;
  private sends: Promise<void>[] = [];
  /** Every lent send of this run, settled either way, kept through a fall-back (goSlow forgets `sends`). */
  private lent: Promise<unknown>[] = [];
  private fast: FastState | null = null;

  constructor(
    readonly comm: Communicator,
    readonly id: number,
    readonly name: string,
    opts: CollectiveOptions,
  ) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.segmentBytes = opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
  }

  /** Elements per segment for a codec, never fewer than one. */
  segmentElements(codec: Codec): number {
    return Math.max(1, Math.floor((this.segmentBytes - codec.headerBytes) / codec.bytesPerElement));
  }

  tag(phase: number, step: number, chunk: number): Tag {
    // Speculative messages live in steps of their own, so the negotiated retry never meets them.
    return { id: this.id, step: (phase << 16) | step | (this.fast ? FAST_STEP_BIT : 0), chunk };
  }

  /** Goes ahead on a cached agreement: messages carry `fingerprint` until this rank falls back. */
  goFast(fingerprint: Uint8Array, checkedAfter = false): void {
    const state: FastState = {
      fingerprint,
      checkedAfter,
      sentTo: new Set(),
      heardFrom: new Set(),
      fallen: null,
      agreed: false,
      waiting: new Set(),
      fail: () => {},
    };
    state.fail = (f) => {
      if (state.fallen) return;
      state.fallen = f;
      for (const reject of state.waiting) reject(f);
      state.waiting.clear();
    };
    this.fast = state;
  }

  /** Whether this run is going ahead on a cached agreement (and has not fallen back). */
  get goingAhead(): boolean {
    return this.fast !== null && this.fast.fallen === null;
  }

  /** The reason this rank stopped going ahead on its cache, if it did. */
  get fallen(): Fallback | null {
    return this.fast?.fallen ?? null;
  }

  /**
   * Marks that data from every rank has reached this one through links whose first messages
   * carried this rank's own fingerprint: every rank went ahead on the same agreement, so none
   * missed or disagrees, and a body may now change its buffer for good (ring.ts's reduce-scatter
   * says when). Only a silent peer could still stop it, and that is then what it is on the
   * negotiated path: a timeout while data moves.
   */
  agreed(): void {
    if (this.fast && !this.fast.fallen) this.fast.agreed = true;
  }

  /**
   * Stops the fast path (every pending receive rejects with `f`); the first reason wins. Once
   * agreed there is no going back to negotiate (buffers may hold results): the communicator is
   * aborted instead, so every rank fails alike, and the error it failed with is returned.
   */
  fallBack(f: Fallback): Error {
    const fast = this.fast;
    if (fast?.agreed && !fast.fallen) {
      const err = new RingtrainError(
        ErrorCode.Timeout,
        `collective #${this.id} '${this.name}' on rank ${this.comm.rank}: ${f.message}, after every rank had gone ahead on the same agreement and data was reduced; the collective was aborted. A peer this slow needs a longer timeoutMs`,
        { rank: this.comm.rank },
      );
      this.comm.abort(err);
      return this.comm.error ?? err;
    }
    fast?.fail(f);
    return fast?.fallen ?? f;
  }

  /** Back to negotiated messages (plain steps, no fingerprints), forgetting the sends queued on the fast path. */
  goSlow(): void {
    this.fast = null;
    this.sends = [];
  }

  /** Queues a send without waiting for it (the payload is copied at once); `flush()` waits for them all. */
  send(peer: number, tag: Tag, payload: Uint8Array): void {
    const out = this.fingerprinted(peer, payload);
    if (!out) return;
    const p = this.comm.send(peer, tag, out);
    p.catch(() => {}); // observed in flush(); a failure also aborts the communicator
    this.sends.push(p);
  }

  /**
   * Queues a send of `payload` where it lies (Communicator.lend): its bytes stay as they are until
   * the returned promise resolves. `flush()` waits for it too, so a collective resolves only once
   * nothing reads its caller's tensor any more.
   */
  lend(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    const out = this.fingerprinted(peer, payload);
    if (!out) return Promise.resolve();
    const p = lendOrSend(this.comm, peer, tag, out);
    this.sends.push(p);
    // Kept settled either way: a failure is observed in flush(), and also aborts the communicator.
    this.lent.push(p.catch(() => {}));
    return p;
  }

  /**
   * Resolves once every send this run lent so far has settled: then the memory they were lent from
   * may be written (the allgather's blocks, which reduce-scatter sent from) or handed on.
   */
  lentSettled(): Promise<void> {
    return Promise.all(this.lent).then(() => {});
  }

  /** The payload as it goes to `peer`: on the fast path its first message carries the agreement's fingerprint; null once the path fell. */
  private fingerprinted(peer: number, payload: Uint8Array): Uint8Array | null {
    const f = this.fast;
    if (!f) return payload;
    if (f.fallen) return null;
    if (f.sentTo.has(peer)) return payload;
    f.sentTo.add(peer);
    const out = new Uint8Array(FINGERPRINT_BYTES + payload.byteLength);
    out.set(f.fingerprint);
    out.set(payload, FINGERPRINT_BYTES);
    return out;
  }

  recv(peer: number, tag: Tag): Promise<Uint8Array> {
    const f = this.fast;
    if (!f) return this.comm.recv(peer, tag, this.timeoutMs);
    if (f.fallen) return Promise.reject(f.fallen);
    // Tags are received from a peer in the order it sent them, so our first receive is its first send.
    const first = !f.heardFrom.has(peer);
    f.heardFrom.add(peer);
    const got = this.comm.recv(peer, tag, this.timeoutMs).then(
      (bytes) => {
        if (!first) return bytes;
        const head = bytes.subarray(0, FINGERPRINT_BYTES);
        if (bytes.byteLength >= FINGERPRINT_BYTES && sameBytes(head, f.fingerprint))
          return bytes.subarray(FINGERPRINT_BYTES);
        // A fingerprint that fails its own check was changed on the way, as the data behind it may have
        // been: no rank went ahead on another agreement. Where the data is checked after the collective,
        // it goes on and the checks name the link; falling back could only abort a rank that had gone
        // ahead with nobody named.
        if (f.checkedAfter && bytes.byteLength >= FINGERPRINT_BYTES && !fingerprintIntact(head))
          return bytes.subarray(FINGERPRINT_BYTES);
        throw this.fallBack(new Fallback(`rank ${peer} went ahead on another agreement`, true));
      },
      (e: unknown) => {
        // A silent peer may be negotiating, or late: the coordinator tells which, naming it.
        if ((e as RingtrainError).code === ErrorCode.Timeout)
          throw this.fallBack(new Fallback(`rank ${peer} sent nothing`, true));
        throw e;
      },
    );
    return new Promise<Uint8Array>((resolve, reject) => {
      f.waiting.add(reject);
      got.then(
        (bytes) => {
          f.waiting.delete(reject);
          resolve(bytes);
        },
        (e: unknown) => {
          f.waiting.delete(reject);
          reject(e);
        },
      );
    });
  }

  /**
   * Resolves once every queued send but the last `keep` has gone out (a failed one rejects, as
   * in flush). A sender that has the whole tensor at hand waits here, so it holds frames for a
   * window of it, not a copy of all of it.
   */
  async sendsInFlightAtMost(keep: number): Promise<void> {
    const before = this.sends.length - 1 - keep;
    if (before >= 0) await this.sends[before];
  }

  async flush(): Promise<void> {
    const all = this.sends;
    this.sends = [];
    await Promise.all(all);
  }

  async phase<T>(phase: Phase, body: () => Promise<T>): Promise<T> {
    const ev = this.comm.events;
    if (ev.active) ev.emit({ type: 'phase-begin', t: now(), rank: this.comm.rank, id: this.id, phase });
    try {
      return await body();
    } finally {
      if (ev.active) ev.emit({ type: 'phase-end', t: now(), rank: this.comm.rank, id: this.id, phase });
    }
  }

  /** chunk-send / chunk-recv events; values only when the bus asks for them (teaching mode). */
  chunkEvent(
    kind: 'chunk-send' | 'chunk-recv',
    phase: Phase,
    step: number,
    from: number,
    to: number,
    chunk: number,
    seg: Range,
    bytes: number,
    values?: Tensor,
    result?: Tensor,
  ): void {
    const ev = this.comm.events;
    if (!ev.active) return;
    const base = {
      t: now(),
      rank: this.comm.rank,
      id: this.id,
      phase,
      step,
      from,
      to,
      chunk,
      offset: seg.offset,
      count: seg.count,
      bytes,
    };
    const teach = ev.withValues;
    if (kind === 'chunk-send')
      ev.emit({ type: kind, ...base, values: teach && values ? Array.from(values) : undefined });
    else
      ev.emit({
        type: kind,
        ...base,
        values: teach && values ? Array.from(values) : undefined,
        result: teach && result ? Array.from(result) : undefined,
      });
  }
}
