/**
 * A peer joined to a job on the signaling server: what `connect()` (client.ts)
 * resolves with once the server welcomed it. It follows the job's membership
 * epochs, hands each epoch's WebRTC signals to that epoch's `Signaler`
 * (epoch-signals.ts), answers the server's pings and notices its silence
 * (server-watchdog.ts), and carries progress, reports and the goodbye back.
 * This file is the message handling; how a socket becomes a joined client is
 * client.ts's.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { now, type EventBus } from '../core/events.ts';
import type { Signaler } from '../comm/signaler.ts';
import { EpochSignals } from './epoch-signals.ts';
import type {
  ErrorMsg,
  IceServer,
  IceTransportPolicy,
  JobConfig,
  MembershipMsg,
  PeerLeftMsg,
  ProbeMsg,
  Progress,
  ServerMessage,
} from './protocol.ts';
import { ProbeSignals } from './probe-signals.ts';
import { watchServer } from './server-watchdog.ts';
import { OPEN, signalingError, type WebSocketLike } from './socket.ts';

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
  /** This epoch's TCP link key (base64), given to native peers only. */
  linkKey?: string;
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

export class SignalingClient {
  private handlers: { [K in keyof ClientEventMap]: Set<Handler<K>> } = {
    membership: new Set(),
    'peer-left': new Set(),
    error: new Set(),
    close: new Set(),
  };
  private current: Membership | null = null;
  private signals = new EpochSignals();
  private probes = new ProbeSignals();
  /** Set while this peer is a candidate of a running job (staged admission): until its first membership. */
  candidacy: { deadlineMs: number } | null = null;
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
    this.watchdog = watchServer(
      heartbeatMs,
      missedHeartbeats,
      () => this.lastSeen,
      (silentMs) =>
        this.end(
          signalingError(`the signaling server at ${url} went silent for ${silentMs} ms; it is gone or unreachable`),
        ),
    );
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
        reject(
          signalingError(
            `no matching membership within ${timeoutMs} ms (now epoch ${this.current?.epoch}, size ${this.current?.size})`,
          ),
        );
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
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `signaler epoch must be a membership epoch (>= 1), got ${epoch}`,
      );
    }
    return {
      send: (toRank, data) => this.sendSignal(epoch, toRank, data),
      onSignal: (handler) => this.signals.subscribe(epoch, this.current?.epoch, handler),
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

  /**
   * Hands `handler` every admission probe this peer is an end of (protocol.ts, "Staged admission"),
   * those that came before it subscribed first: a candidate's come right after its welcome.
   */
  onProbe(handler: (p: ProbeMsg) => void): void {
    this.probes.onProbe(handler);
  }

  /** A two-rank Signaler for probe `p`: this end is rank `p.side`, the other end the other rank. */
  probeSignaler(p: ProbeMsg): Signaler {
    return {
      send: (_toRank, data) => this.write({ type: 'probe-signal', probe: p.probe, data }),
      onSignal: (handler) => this.probes.subscribe(p.probe, (data) => handler(1 - p.side, data)),
    };
  }

  /** The member end of probe `probe` got its nonce back over the link: the candidate may be admitted. */
  probeOk(probe: number): void {
    this.write({ type: 'probe-ok', probe });
  }

  /** Probe `probe` is over on this end: its signals are no longer kept. */
  endProbe(probe: number): void {
    this.probes.end(probe);
  }

  /** Tells the server (and through it the page) how training goes. */
  reportProgress(progress: Progress): void {
    this.write({ type: 'progress', ...progress });
  }

  /** Tells the server this peer completed a step on the ring of `epoch` (with every member of it): what makes members voters. */
  attest(epoch: number): void {
    this.write({ type: 'attest', epoch });
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
          ...(msg.linkKey !== undefined ? { linkKey: msg.linkKey } : {}),
        };
        this.current = m;
        this.candidacy = null;
        this.signals.begin(m.epoch);
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
        this.events?.emit({
          type: 'peer-lost',
          t: now(),
          rank: this.rank,
          peer: msg.rank,
          reason: `${msg.name ?? msg.peerId} ${msg.reason}`,
        });
        return this.emit('peer-left', msg);
      case 'signal':
        return this.signals.receive(msg.epoch, msg.from, msg.data);
      case 'error':
        return this.onServerError(msg);
      case 'candidate':
        this.candidacy = { deadlineMs: msg.deadlineMs };
        return;
      case 'probe':
        return this.probes.started(msg);
      case 'probe-signal':
        return this.probes.receive(msg.probe, msg.data);
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
