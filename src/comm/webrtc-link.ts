import type SimplePeer from 'simple-peer';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { now } from '../core/events.ts';
import { detectRuntime } from '../core/runtime.ts';
import { newIceProgress, noPathError, noteCandidates, type IceProgress, type IceServer } from './ice-diagnosis.ts';
import { LinkEnd, type Link } from './link.ts';
import { isLinkChoice } from './link-choice.ts';
import type { Signaler } from './signaler.ts';
import { CAN_FREE_RECEIVED, ReceivedMessages, SendBuffers } from './webrtc-buffers.ts';

/**
 * Links over WebRTC data channels through simple-peer. In the browser
 * simple-peer finds the native RTCPeerConnection; Node and Deno pass the
 * `wrtc` implementation in (see wrtc.node.ts), so this file stays portable.
 */
class SimplePeerLink implements Link {
  readonly transport = 'webrtc';
  private readonly end = new LinkEnd();
  /** Frames reused, and received messages freed when given back: only together (webrtc-buffers.ts says why). */
  private readonly sendBuffers = CAN_FREE_RECEIVED ? new SendBuffers() : null;
  private readonly received = CAN_FREE_RECEIVED ? new ReceivedMessages() : null;

  constructor(
    readonly peer: number,
    private sp: SimplePeer.Instance,
  ) {
    sp.on('data', (d: Uint8Array | ArrayBuffer) => {
      const message = d instanceof Uint8Array ? d : new Uint8Array(d);
      this.received?.deliver(message);
      this.end.deliver(message);
    });
    sp.on('error', (e: Error) => this.shut(e));
    sp.on('close', () => this.shut(new Error('data channel closed')));
    // 'disconnected' is left alone: on a starved machine ICE consent checks lapse and recover
    // (seen in benchmarks); the communicator's heartbeats decide whether a quiet peer is gone.
    sp.on('iceStateChange', (ice: string) => {
      if (ice === 'failed' || ice === 'closed') this.shut(new Error(`ICE connection ${ice}`));
    });
  }

  send(message: Uint8Array): void {
    if (this.end.down) throw new Error(`link to rank ${this.peer} is down`);
    // node-webrtc (@roamhq/wrtc) cleans a channel up when its connection closes, before the
    // 'close' event reaches us; its send() then calls through a null pointer and the process
    // dies with SIGSEGV (seen in RTCDataChannel::Send, under Deno, when a neighbour left).
    // readyState stays safe to read, so a channel that is no longer open is down here.
    const state = this.sp.destroyed
      ? 'destroyed'
      : (this.sp as unknown as { _channel?: { readyState?: string } })._channel?.readyState;
    if (state !== undefined && state !== 'open') {
      this.shut(new Error(`data channel ${state}`));
      throw new Error(`link to rank ${this.peer} is down (its data channel is ${state})`);
    }
    this.sp.send(message);
    // The stack copied it: its buffer may take the next frame.
    this.sendBuffers?.give(message);
  }

  messageBuffer(bytes: number): Uint8Array {
    return this.sendBuffers ? this.sendBuffers.take(bytes) : new Uint8Array(bytes);
  }

  /** Takes back a message this link delivered: its memory goes now where the runtime can drop it (webrtc-buffers.ts). */
  recycle(message: Uint8Array): void {
    this.received?.free(message);
  }

  bufferedAmount(): number {
    // node-webrtc has crashed the process (SIGSEGV) on reads of a channel whose connection
    // is gone (node-webrtc issues #325, #576): never touch the channel after it went down.
    if (this.end.down) return 0;
    return this.sp.bufferSize;
  }

  onMessage(handler: (m: Uint8Array) => void): void {
    this.end.onMessage(handler);
  }

  onClose(handler: (reason?: Error) => void): void {
    this.end.onClose(handler);
  }

  close(): void {
    this.shut(undefined);
  }

  private shut(reason?: Error): void {
    if (this.end.shut(reason)) this.sp.destroy();
  }
}

export interface ConnectOptions {
  rank: number;
  size: number;
  signaler: Signaler;
  /** An RTCPeerConnection implementation for Node/Deno (`@roamhq/wrtc`); omit in the browser. */
  wrtc?: unknown;
  /** Give up on a peer that has signalled (it is running) if its link is not up this long after its first signal (ms). */
  timeoutMs?: number;
  /**
   * Give up on a peer that has sent no signal at all after this long (ms); default: timeoutMs.
   * A peer that has just joined the job is a member before it can answer: it may still be
   * loading its data or compiling kernels, and on a busy machine that outlasts timeoutMs.
   */
  silentTimeoutMs?: number;
  /** Stop trying, rejecting with the signal's reason, e.g. when the membership moved on meanwhile. */
  abort?: AbortSignal;
  /** Open channels to these ranks only (default: every other rank); the others are linked some other way (mesh.ts). */
  peers?: number[];
  /** STUN/TURN servers; none are needed on one machine or a LAN. Across NATs, the job's TURN server. */
  iceServers?: IceServer[];
  /** 'relay': use TURN relays only (RTCConfiguration.iceTransportPolicy). */
  iceTransportPolicy?: 'all' | 'relay';
}

type PeerConstructor = new (opts: SimplePeer.Options) => SimplePeer.Instance;
let loaded: Promise<PeerConstructor> | null = null;

/**
 * simple-peer's Node build needs Node's `events`, `process` and `global`; in
 * the browser its own prebuilt bundle carries those shims. Each runtime
 * imports only its own build (both imports stay visible to bundlers).
 */
function loadSimplePeer(): Promise<PeerConstructor> {
  loaded ??=
    detectRuntime() === 'browser'
      ? import('simple-peer/simplepeer.min.js').then((m) => (m.default ?? m) as unknown as PeerConstructor)
      : import('simple-peer').then((m) => (m.default ?? m) as unknown as PeerConstructor);
  return loaded;
}

function abortReason(signal: AbortSignal): RingtrainError {
  const r: unknown = signal.reason;
  return r instanceof RingtrainError
    ? r
    : new RingtrainError(
        ErrorCode.Aborted,
        `stopped opening data channels: ${r instanceof Error ? r.message : String(r)}`,
      );
}

/** One connectMesh call while its channels open: its peers, the links open so far, and what each peer has done. */
interface MeshWait {
  o: ConnectOptions;
  timeoutMs: number;
  silentTimeoutMs: number;
  peers: Map<number, SimplePeer.Instance>;
  links: Map<number, Link>;
  /** What ICE did per peer, to say why a link never opened. */
  progress: Map<number, IceProgress>;
  /** When each peer's first signal came (in `awake` time): from then on it has timeoutMs to connect. */
  heardAt: Map<number, number>;
  /** Milliseconds this event loop has been awake since we started (see startDeadlines). */
  awake: number;
}

/**
 * Opens a data channel to every other rank (a full mesh: the ring uses the
 * neighbours, negotiation and alltoall use the rest). The lower rank offers.
 */
export async function connectMesh(o: ConnectOptions): Promise<Map<number, Link>> {
  const timeoutMs = o.timeoutMs ?? 30_000;
  const SimplePeer = await loadSimplePeer();
  const w: MeshWait = {
    o,
    timeoutMs,
    silentTimeoutMs: Math.max(timeoutMs, o.silentTimeoutMs ?? timeoutMs),
    peers: new Map(),
    links: new Map(),
    progress: new Map(),
    heardAt: new Map(),
    awake: 0,
  };
  createPeers(w, SimplePeer);
  const unsubscribe = o.signaler.onSignal((from, data) => {
    const sp = w.peers.get(from);
    // Link-choice messages (mesh.ts) share the signaling path; they are not WebRTC's.
    if (!sp || isLinkChoice(data)) return;
    const ice = w.progress.get(from)!;
    if (!ice.heard) w.heardAt.set(from, w.awake);
    ice.heard = true;
    noteCandidates(ice.remote, data);
    try {
      sp.signal(data as SimplePeer.SignalData);
    } catch (e) {
      sp.destroy(e as Error);
    }
  });
  let timer: ReturnType<typeof setInterval> | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = (e: RingtrainError) => reject(e);
      if (o.abort) {
        const signal = o.abort;
        onAbort = () => fail(abortReason(signal));
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
      }
      timer = startDeadlines(w, fail);
      if (w.peers.size === 0) resolve();
      watchPeers(w, resolve, fail);
    });
  } catch (e) {
    for (const sp of w.peers.values()) sp.destroy();
    throw e;
  } finally {
    clearInterval(timer);
    if (onAbort) o.abort?.removeEventListener('abort', onAbort);
  }
  // Late signals (extra candidates) still go through while links run; stop listening once all are down.
  let open = w.peers.size;
  for (const sp of w.peers.values()) sp.once('close', () => --open === 0 && unsubscribe());
  return w.links;
}

/** A SimplePeer per rank this call connects to, its signals sent through the signaler and its ICE progress noted. */
function createPeers(w: MeshWait, SimplePeer: PeerConstructor): void {
  const o = w.o;
  for (let p = 0; p < o.size; p++) {
    if (p === o.rank || (o.peers && !o.peers.includes(p))) continue;
    const sp = new SimplePeer({
      initiator: o.rank < p,
      trickle: true,
      wrtc: o.wrtc as SimplePeer.Options['wrtc'],
      config: { iceServers: o.iceServers ?? [], iceTransportPolicy: o.iceTransportPolicy ?? 'all' },
      channelConfig: { ordered: true },
    });
    const ice = newIceProgress();
    w.progress.set(p, ice);
    sp.on('signal', (data: unknown) => {
      noteCandidates(ice.local, data);
      o.signaler.send(p, data);
    });
    sp.on('iceStateChange', (state: string) => (ice.state = state));
    w.peers.set(p, sp);
  }
}

/**
 * Each missing peer against its own deadline: a peer that answered (so it runs) has timeoutMs
 * from its first signal; one that has said nothing yet has silentTimeoutMs from the start.
 * Time counts only while this event loop runs: a tick that came late (we were busy compiling
 * or starved of CPU) counts as one tick, so our own stall never fails a peer.
 */
function startDeadlines(w: MeshWait, fail: (e: RingtrainError) => void): ReturnType<typeof setInterval> {
  const { o, peers, links, heardAt } = w;
  const tickMs = Math.max(20, Math.min(500, w.timeoutMs / 4));
  let last = now();
  const check = (): void => {
    const t = now();
    w.awake += Math.min(t - last, 2 * tickMs);
    last = t;
    for (const p of peers.keys()) {
      const at = heardAt.get(p);
      // A peer that answered through the signaling server is running: the network is what failed.
      if (!links.has(p) && at !== undefined && w.awake - at >= w.timeoutMs)
        return fail(noPathError(o.rank, p, w.progress.get(p)!, o.iceServers, w.timeoutMs));
    }
    const silent = [...peers.keys()].filter((p) => !links.has(p) && !heardAt.has(p));
    if (silent.length > 0 && w.awake >= w.silentTimeoutMs) {
      fail(
        new RingtrainError(
          ErrorCode.Timeout,
          `rank ${o.rank} could not open a data channel to rank(s) ${silent.join(', ')}: no signal from them within ${Math.round(w.silentTimeoutMs)} ms; are they running and using the same signaling?`,
          { waitingFor: silent, rank: o.rank },
        ),
      );
    }
  };
  return setInterval(check, tickMs);
}

/** Resolves once every peer's channel is open; fails on the first peer that errs before it opened. */
function watchPeers(w: MeshWait, resolve: () => void, fail: (e: RingtrainError) => void): void {
  const { o, peers, links } = w;
  for (const [p, sp] of peers) {
    sp.once('connect', () => {
      links.set(p, new SimplePeerLink(p, sp));
      if (links.size === peers.size) resolve();
    });
    sp.once('error', (e: Error & { code?: string }) => {
      if (links.has(p)) return;
      if (e.code === 'ERR_ICE_CONNECTION_FAILURE')
        return fail(noPathError(o.rank, p, w.progress.get(p)!, o.iceServers, undefined, e));
      fail(
        new RingtrainError(
          ErrorCode.Transport,
          `WebRTC to rank ${p} failed while connecting: ${e.message}`,
          { peer: p, rank: o.rank },
          { cause: e },
        ),
      );
    });
  }
}
