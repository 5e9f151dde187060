/**
 * The client of the signaling server, for the browser, Deno and Node (Node 20
 * has no global WebSocket: `./client.node.ts` injects the `ws` package's).
 *
 *   const client = await connect(url, { job, token });
 *   const m = await client.waitForReady();          // membership with ready: true
 *   const signaler = client.signaler(m.epoch);      // a Signaler for that epoch
 *   client.on('membership', (m) => ...);            // every join/leave bumps the epoch
 *   client.reportProgress({ step, loss });
 *   await client.leave();
 *
 * Signals are logged per epoch, so a Signaler subscribed late still sees every
 * signal of its epoch from the start (an offer may arrive before the link that
 * wants it exists). The log is dropped when the epoch moves on.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { now, type EventBus } from '../core/events.ts';
import { detectRuntime, type RuntimeName } from '../core/runtime.ts';
import type { Signaler } from '../comm/signaler.ts';
import {
  PROTOCOL_VERSION,
  WS_PATH,
  describeIssues,
  serverMessageSchema,
  type Capabilities,
  type ErrorMsg,
  type IceServer,
  type IceTransportPolicy,
  type JobConfig,
  type MembershipMsg,
  type PeerLeftMsg,
  type Progress,
  type ServerMessage,
} from './protocol.ts';

/** The part of the WebSocket API used here; the browser's, Deno's and `ws`'s all fit. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: never) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: never) => void) | null;
}
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ConnectOptions {
  job: string;
  token: string;
  /** Shown to other peers and on the page. */
  name?: string;
  /** Default: the runtime this code runs in. */
  runtime?: RuntimeName;
  capabilities?: Capabilities;
  /** Default: globalThis.WebSocket (browser, Deno). */
  WebSocket?: WebSocketConstructor;
  /** How long to wait for the connection, the welcome and the first membership. Default 10 s. */
  timeoutMs?: number;
  /** Membership and peer-lost events are emitted here too. */
  events?: EventBus;
}

/** A membership epoch, as this peer sees it. */
export interface Membership {
  epoch: number;
  /** This peer's rank in the epoch. */
  rank: number;
  size: number;
  peers: MembershipMsg['peers'];
  /** `ring[i]` is the rank at ring position i. */
  ring: number[];
  ready: boolean;
  started: boolean;
  change: MembershipMsg['change'];
}

interface ClientEventMap {
  membership: Membership;
  'peer-left': PeerLeftMsg;
  /** A non-fatal error the server reported (stale epoch, rate limited...). */
  error: RingtrainError;
  /** The connection ended: null after leave(), else why. */
  close: RingtrainError | null;
}
type Handler<K extends keyof ClientEventMap> = (value: ClientEventMap[K]) => void;

/** Signals kept per epoch for late subscribers; beyond this the oldest are dropped. */
const MAX_SIGNAL_LOG = 4096;
const DEFAULT_TIMEOUT_MS = 10_000;
const OPEN = 1;

function signalingError(message: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.Signaling, message, detail);
}

/** A throwing signal handler must not take the socket's message loop down with it. */
function deliver(handler: (from: number, data: unknown) => void, from: number, data: unknown): void {
  try {
    handler(from, data);
  } catch (err) {
    console.error(`ringtrain: a signal handler threw on a signal from rank ${from}:`, err);
  }
}

/** http(s)://host[:port] becomes ws(s)://host[:port]/ws; a ws(s) URL is used as given. */
export function signalingUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RingtrainError(ErrorCode.InvalidArgument, `'${url}' is not a URL; give the server's address, like http://127.0.0.1:8080`);
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    if (u.pathname === '/' || u.pathname === '') u.pathname = WS_PATH;
  } else if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `signaling URL must be http(s) or ws(s), got '${u.protocol}'`);
  }
  return u.toString();
}

export class SignalingClient {
  private handlers: { [K in keyof ClientEventMap]: Set<Handler<K>> } = {
    membership: new Set(),
    'peer-left': new Set(),
    error: new Set(),
    close: new Set(),
  };
  private current: Membership | null = null;
  private signalLog: { epoch: number; entries: { from: number; data: unknown }[] } = { epoch: -1, entries: [] };
  private signalHandlers = new Map<number, Set<(from: number, data: unknown) => void>>();
  private lastSeen = now();
  private watchdog: ReturnType<typeof setInterval>;
  /** undefined while open; null after leave(); else why it ended. */
  private ended: RingtrainError | null | undefined = undefined;
  private closeEmitted = false;
  /** Signals this peer tried to send for an epoch that is over (dropped). */
  staleSignalsDropped = 0;
  /** The job's STUN/TURN servers (TURN with credentials minted for this peer), from the welcome. */
  ice: { iceServers?: IceServer[]; iceTransportPolicy?: IceTransportPolicy } = {};

  /** @internal Built by connect(). */
  constructor(
    private readonly ws: WebSocketLike,
    readonly url: string,
    readonly peerId: string,
    readonly job: { id: string; config: JobConfig },
    readonly heartbeatMs: number,
    readonly missedHeartbeats: number,
    private readonly events?: EventBus,
  ) {
    // The server pings every heartbeatMs; silence for longer than it allows a peer means it is gone.
    const silentMs = heartbeatMs * (missedHeartbeats + 1);
    let lastTick = now();
    this.watchdog = setInterval(() => {
      const t = now();
      // A late tick means this peer was stalled (a long training step, a background tab):
      // the server's messages are still queued, so do not judge it this round.
      const late = t - lastTick > heartbeatMs * 2;
      lastTick = t;
      if (!late && t - this.lastSeen > silentMs) {
        this.end(signalingError(`the signaling server at ${url} went silent for ${silentMs} ms; it is gone or unreachable`));
      }
    }, heartbeatMs);
    (this.watchdog as { unref?: () => void }).unref?.();
  }

  /** The latest membership (null only before the first one arrives). */
  get membership(): Membership | null {
    return this.current;
  }

  get rank(): number {
    return this.current?.rank ?? -1;
  }

  get closed(): boolean {
    return this.ended !== undefined;
  }

  on<K extends keyof ClientEventMap>(event: K, handler: Handler<K>): () => void {
    this.handlers[event].add(handler);
    return () => this.handlers[event].delete(handler);
  }

  private emit<K extends keyof ClientEventMap>(event: K, value: ClientEventMap[K]): void {
    for (const h of [...this.handlers[event]]) {
      try {
        h(value);
      } catch (err) {
        console.error(`ringtrain: a signaling '${event}' handler threw:`, err);
      }
    }
  }

  /** Resolves with the first membership (the current one included) that satisfies `pred`. */
  nextMembership(pred: (m: Membership) => boolean, timeoutMs = 60_000): Promise<Membership> {
    if (this.current && pred(this.current)) return Promise.resolve(this.current);
    // Closed: no membership will ever come (waiting would hang until the timeout).
    if (this.closed) return Promise.reject(this.ended ?? signalingError('left the job; no membership will come'));
    return new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        offM();
        offC();
      };
      const timer = setTimeout(() => {
        done();
        reject(signalingError(`no matching membership within ${timeoutMs} ms (now epoch ${this.current?.epoch}, size ${this.current?.size})`));
      }, timeoutMs);
      const offM = this.on('membership', (m) => {
        if (pred(m)) {
          done();
          resolve(m);
        }
      });
      const offC = this.on('close', (err) => {
        done();
        reject(err ?? signalingError('left the job while waiting for a membership'));
      });
    });
  }

  /** Resolves once the job has at least minPeers peers. */
  waitForReady(timeoutMs = 60_000): Promise<Membership> {
    return this.nextMembership((m) => m.ready, timeoutMs);
  }

  /**
   * A Signaler for one epoch (default: the current one). Sends for an epoch
   * that is over are dropped (`staleSignalsDropped` counts them): the new
   * membership event tells the owner to set up links again.
   */
  signaler(epoch: number = this.current?.epoch ?? -1): Signaler {
    if (!Number.isInteger(epoch) || epoch < 1) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `signaler epoch must be a membership epoch (>= 1), got ${epoch}`);
    }
    return {
      send: (toRank, data) => this.sendSignal(epoch, toRank, data),
      onSignal: (handler) => {
        if (epoch !== this.signalLog.epoch && epoch !== this.current?.epoch) return () => {};
        let set = this.signalHandlers.get(epoch);
        if (!set) this.signalHandlers.set(epoch, (set = new Set()));
        set.add(handler);
        if (this.signalLog.epoch === epoch) for (const s of [...this.signalLog.entries]) deliver(handler, s.from, s.data);
        return () => set.delete(handler);
      },
    };
  }

  private sendSignal(epoch: number, toRank: number, data: unknown): void {
    if (!Number.isInteger(toRank) || toRank < 0) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `signal target must be a rank (integer >= 0), got ${toRank}`);
    }
    if (data === undefined || data === null) {
      throw new RingtrainError(ErrorCode.InvalidArgument, 'signal data must not be null or undefined');
    }
    if (epoch !== this.current?.epoch) {
      this.staleSignalsDropped++;
      return;
    }
    this.write({ type: 'signal', epoch, to: toRank, data });
  }

  /** Tells the server (and through it the page) how training goes. */
  reportProgress(progress: Progress): void {
    this.write({ type: 'progress', ...progress });
  }

  /** Tells the server that peer `peerId` broke the rules on our ring; a majority of reports ejects it. */
  report(peerId: string, reason: string): void {
    this.write({ type: 'report', peerId, reason: reason.slice(0, 256) });
  }

  /** Leaves the job cleanly; the others get peer-left with reason 'left'. */
  leave(reason?: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.ws.close(1000, 'left'), 2000);
      this.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.write({ type: 'leave', ...(reason ? { reason: reason.slice(0, 256) } : {}) });
      this.ended = null;
    });
  }

  private write(msg: object): void {
    if (this.ended !== undefined || this.ws.readyState !== OPEN) return;
    this.ws.send(JSON.stringify(msg));
  }

  /** @internal */
  handle(msg: ServerMessage): void {
    this.lastSeen = now();
    switch (msg.type) {
      case 'ping':
        return this.write({ type: 'pong', seq: msg.seq });
      case 'membership': {
        // Epochs only grow; an older one (never sent by a correct server) is ignored.
        if (this.current && msg.epoch <= this.current.epoch) return;
        const m: Membership = {
          epoch: msg.epoch,
          rank: msg.you,
          size: msg.size,
          peers: msg.peers,
          ring: msg.ring,
          ready: msg.ready,
          started: msg.started,
          change: msg.change,
        };
        this.current = m;
        this.signalLog = { epoch: m.epoch, entries: [] };
        for (const e of this.signalHandlers.keys()) if (e < m.epoch) this.signalHandlers.delete(e);
        this.events?.emit({
          type: 'membership',
          t: now(),
          rank: m.rank,
          size: m.size,
          epoch: m.epoch,
          peers: m.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })),
        });
        return this.emit('membership', m);
      }
      case 'peer-left':
        this.events?.emit({ type: 'peer-lost', t: now(), rank: this.rank, peer: msg.rank, reason: `${msg.name ?? msg.peerId} ${msg.reason}` });
        return this.emit('peer-left', msg);
      case 'signal': {
        if (msg.epoch !== this.signalLog.epoch) return;
        const log = this.signalLog.entries;
        log.push({ from: msg.from, data: msg.data });
        if (log.length > MAX_SIGNAL_LOG) log.shift();
        for (const h of [...(this.signalHandlers.get(msg.epoch) ?? [])]) deliver(h, msg.from, msg.data);
        return;
      }
      case 'error':
        return this.onServerError(msg);
      case 'welcome':
        return;
    }
  }

  private onServerError(msg: ErrorMsg): void {
    const err = signalingError(`signaling server: ${msg.message}`, { code: msg.code, fatal: msg.fatal });
    if (msg.fatal) this.end(err);
    else this.emit('error', err);
  }

  /** @internal The socket closed, or we gave up on it. Emits 'close' once. */
  end(err: RingtrainError | null): void {
    clearInterval(this.watchdog);
    if (this.ended === undefined) this.ended = err;
    if (this.ws.readyState === OPEN) this.ws.close(1000);
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.emit('close', this.ended);
  }
}

/** Connects and joins `job`; resolves once the first membership arrived. */
export function connect(url: string, options: ConnectOptions): Promise<SignalingClient> {
  const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WS) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      "no WebSocket in this runtime; in Node use connect() from 'src/signaling/client.node.ts' (it brings the ws package)",
    );
  }
  if (!options.job || !options.token) {
    throw new RingtrainError(ErrorCode.InvalidArgument, 'connect() needs a job id and its token (--job, --token)');
  }
  const wsUrl = signalingUrl(url);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new Promise<SignalingClient>((resolve, reject) => {
    let ws: WebSocketLike;
    try {
      ws = new WS(wsUrl);
    } catch (err) {
      return reject(signalingError(`cannot open a WebSocket to ${wsUrl}: ${String(err)}`, { url: wsUrl }));
    }
    let client: SignalingClient | null = null;
    let settled = false;
    let refusal: RingtrainError | null = null;
    const fail = (err: RingtrainError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client?.end(err);
      if (ws.readyState === OPEN) ws.close(1000);
      reject(err);
    };
    const timer = setTimeout(() => fail(signalingError(`no answer from the signaling server at ${wsUrl} within ${timeoutMs} ms`, { url: wsUrl })), timeoutMs);

    ws.onopen = () => {
      ws.send(
        JSON.stringify({
          type: 'join',
          protocol: PROTOCOL_VERSION,
          job: options.job,
          token: options.token,
          runtime: options.runtime ?? detectRuntime(),
          ...(options.name ? { name: options.name } : {}),
          ...(options.capabilities ? { capabilities: options.capabilities } : {}),
        }),
      );
    };
    ws.onerror = () => {
      // The close event follows with the details the runtime gives; nothing to add here.
    };
    ws.onclose = (ev) => {
      const err =
        refusal ??
        signalingError(
          client
            ? `the signaling server at ${wsUrl} closed the connection (code ${ev.code}${ev.reason ? `, ${ev.reason}` : ''})`
            : `cannot reach the signaling server at ${wsUrl} (code ${ev.code}); is it running? (ringtrain server)`,
          { url: wsUrl, closeCode: ev.code },
        );
      if (!settled) return fail(err);
      client?.end(err);
    };
    ws.onmessage = (ev) => {
      let msg: ServerMessage;
      try {
        const parsed = serverMessageSchema.safeParse(JSON.parse(String(ev.data)));
        if (!parsed.success) throw new Error(describeIssues(parsed.error));
        msg = parsed.data;
      } catch (err) {
        // A server that speaks something else: not ours to guess at.
        const e = signalingError(`the server at ${wsUrl} sent a message this client does not understand: ${String(err)}`);
        return settled ? client?.end(e) : fail(e);
      }
      if (client) {
        client.handle(msg);
        if (!settled && client.membership) {
          settled = true;
          clearTimeout(timer);
          resolve(client);
        }
        return;
      }
      if (msg.type === 'error') {
        refusal = signalingError(`signaling server refused to join job '${options.job}': ${msg.message}`, { code: msg.code, fatal: msg.fatal });
        if (msg.fatal) fail(refusal);
        return;
      }
      if (msg.type === 'welcome') {
        if (msg.protocol !== PROTOCOL_VERSION) {
          return fail(signalingError(`server speaks protocol ${msg.protocol}, this client ${PROTOCOL_VERSION}: update one of them`));
        }
        client = new SignalingClient(ws, wsUrl, msg.peerId, msg.job, msg.heartbeatMs, msg.missedHeartbeats, options.events);
        client.ice = { iceServers: msg.iceServers, iceTransportPolicy: msg.iceTransportPolicy };
      }
      // Pings before the welcome cannot happen; anything else before it is ignored.
    };
  });
}
