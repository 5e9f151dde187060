/**
 * One WebSocket connection: rate limit, parse, validate, dispatch. Every bad
 * frame ends in an `error` reply (and, when fatal, a close), never a throw:
 * nothing a client sends can take the server down.
 *
 * Before `join` only `join` is accepted, and any error is fatal. After it,
 * a bad message is answered and dropped; the connection stays.
 */
import { randomUUID } from 'node:crypto';
import type { WebSocket, RawData } from 'ws';
import {
  CloseCode,
  PROTOCOL_VERSION,
  PeerLeftReason,
  SignalErrorCode,
  clientMessageSchemas,
  describeIssues,
  type ClientMessage,
  type ClientMessageType,
  type JoinMsg,
  type ServerMessage,
} from '../src/signaling/protocol.ts';
import { RefusalReason, type Admission, type Handshake } from './admission.ts';
import type { PeerIce } from './ice.ts';
import type { Job, Member } from './jobs.ts';
import type { ServerMetrics } from './metrics.ts';
import { TokenBucket, type RateLimitOptions } from './rate-limit.ts';
import { signingKeyProblem } from './signing-key.ts';

/** How long a refused socket gets to answer the close handshake before it is cut (it holds a socket until then). */
const REFUSED_CLOSE_GRACE_MS = 1000;

export interface ConnectionContext {
  job(id: string): Job | undefined;
  metrics: ServerMetrics;
  rateLimit: RateLimitOptions;
  heartbeatMs: number;
  missedHeartbeats: number;
  /** A connection must send its join within this after the upgrade, or it is closed. */
  joinTimeoutMs: number;
  admission: Admission;
  /** A peer whose unsent backlog exceeds this many bytes is dropped (it is not reading). */
  maxBufferedBytes: number;
  /** The STUN/TURN servers for one peer of `job`, with TURN credentials minted for it. */
  iceFor(job: Job, peerId: string): PeerIce;
  log(line: string): void;
}

function frameBytes(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data.byteLength;
}

function frameText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

export class Connection implements Handshake {
  private readonly bucket: TokenBucket;
  private member: Member | null = null;
  private job: Job | null = null;
  private closing = false;
  private joinTimer: ReturnType<typeof setTimeout> | null;
  private cutTimer: ReturnType<typeof setTimeout> | null = null;
  private pingSeq = 0;
  private closeReason: { reason: PeerLeftReason; detail?: string } = { reason: PeerLeftReason.Disconnected };
  /** performance.now() of the last frame received. */
  lastSeen = performance.now();

  constructor(
    private readonly ws: WebSocket,
    private readonly ctx: ConnectionContext,
    readonly remote: string,
    /** Who this is for the per-address limits (admission.ts addressKey). */
    readonly addressKey: string = remote,
  ) {
    this.bucket = new TokenBucket(ctx.rateLimit);
    this.joinTimer = setTimeout(() => {
      ctx.metrics.refused(RefusalReason.JoinTimeout);
      this.fail(
        SignalErrorCode.JoinTimeout,
        `no join within ${ctx.joinTimeoutMs} ms of the upgrade; send {type:'join', ...} first`,
      );
    }, ctx.joinTimeoutMs);
    ws.on('message', (data, isBinary) => {
      try {
        this.onFrame(data, isBinary);
      } catch (err) {
        // Last line of defence: a bug here must cost one connection, never the server.
        ctx.metrics.error('internal');
        ctx.log(
          `connection ${remote}: internal error, closing: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
        );
        this.terminate();
      }
    });
    ws.on('error', (err: Error & { code?: string }) => {
      // ws closes the socket itself after these (oversize frame: 1009, bad UTF-8: 1007...).
      const code = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? SignalErrorCode.TooLarge : 'ws-error';
      ctx.metrics.error(code);
      ctx.log(`connection ${remote}: ${err.message}`);
    });
    ws.on('close', () => this.onClose());
  }

  get joined(): boolean {
    return this.member !== null;
  }

  /** Called by the server's heartbeat timer; `judge` false skips the liveness check this round. */
  heartbeat(now: number, judge = true): void {
    if (!this.member || this.closing) return;
    if (judge && now - this.lastSeen > this.ctx.heartbeatMs * this.ctx.missedHeartbeats) {
      this.ctx.metrics.error(SignalErrorCode.Heartbeat);
      this.leaveJob(PeerLeftReason.Heartbeat, `silent for more than ${this.ctx.missedHeartbeats} heartbeats`);
      this.closing = true;
      this.ws.terminate();
      return;
    }
    this.send({ type: 'ping', seq: this.pingSeq++ });
  }

  /** Server shutdown: say so, leave the job quietly, close. */
  shutdown(): void {
    if (this.closing) return;
    this.sendError(SignalErrorCode.ServerClosing, 'the signaling server is shutting down', true);
    this.leaveJob(PeerLeftReason.ServerClosing);
    this.closing = true;
    this.ws.close(CloseCode.GoingAway, SignalErrorCode.ServerClosing);
  }

  /** Admission made room for a newer handshake by closing this one (it never joined). */
  evict(): void {
    this.ctx.metrics.refused(RefusalReason.Evicted);
    this.fail(
      SignalErrorCode.ServerBusy,
      'the server is at its limit of connections that have not joined, and this one waited longest; send join right after connecting',
    );
  }

  /** Most of the job's other peers reported this one: out of the job, for good. */
  private eject(why: string): void {
    if (this.closing) return;
    this.sendError(SignalErrorCode.Ejected, `ejected from the job: ${why}`, true);
    this.leaveJob(PeerLeftReason.Ejected, why);
    this.closing = true;
    this.ws.close(CloseCode.Refused, SignalErrorCode.Ejected);
    this.cutTimer = setTimeout(() => this.ws.terminate(), REFUSED_CLOSE_GRACE_MS);
    this.cutTimer.unref?.();
  }

  /** Cuts the socket without a close handshake. */
  terminate(): void {
    this.closing = true;
    this.ws.terminate();
  }

  send(msg: ServerMessage): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    if (this.ws.bufferedAmount > this.ctx.maxBufferedBytes) {
      this.ctx.metrics.error(SignalErrorCode.SlowConsumer);
      this.ctx.log(`connection ${this.remote}: dropped, ${this.ws.bufferedAmount} bytes unsent`);
      // Leave the job from the close handler, not here: send() may run inside
      // the job's own broadcast, which must finish before the next epoch.
      this.closeReason = { reason: PeerLeftReason.Dropped, detail: 'not reading its messages' };
      this.closing = true;
      this.ws.terminate();
      return;
    }
    let text: string;
    try {
      text = JSON.stringify(msg);
    } catch (err) {
      // Validation should make this impossible; if it happens, drop the message, not the server.
      this.ctx.metrics.error('internal');
      this.ctx.log(`connection ${this.remote}: cannot serialise a '${msg.type}' message: ${String(err)}`);
      return;
    }
    this.ctx.metrics.message('out', msg.type);
    this.ws.send(text);
  }

  private sendError(code: SignalErrorCode, message: string, fatal: boolean): void {
    this.ctx.metrics.error(code);
    this.send({ type: 'error', code, message, fatal });
  }

  /** A fatal error: reply, then close. */
  private fail(code: SignalErrorCode, message: string, closeCode: number = CloseCode.Refused): void {
    if (this.closing) return;
    this.sendError(code, message, true);
    this.leaveJob(PeerLeftReason.Dropped, code);
    this.closing = true;
    this.ctx.admission.handshakeEnded(this);
    this.ws.close(closeCode, code);
    // A client that never answers the close would keep its socket for ws's 30 s close timeout.
    this.cutTimer = setTimeout(() => this.ws.terminate(), REFUSED_CLOSE_GRACE_MS);
    this.cutTimer.unref?.();
  }

  /** An error that kills the connection before join, and only the message after. */
  private reject(code: SignalErrorCode, message: string): void {
    if (this.joined) this.sendError(code, message, false);
    else this.fail(code, message);
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    this.lastSeen = performance.now();
    if (this.closing) return;
    const bytes = frameBytes(data);
    if (!this.bucket.take(bytes)) {
      this.ctx.metrics.error(SignalErrorCode.RateLimited);
      if (this.bucket.exhausted) {
        this.ctx.log(`connection ${this.remote}: closed for flooding`);
        this.fail(
          SignalErrorCode.Flood,
          'closed for flooding: too many messages dropped; keep under the rate limit',
          CloseCode.Flood,
        );
      } else if (this.bucket.dropsInARow === 1) {
        // One notice per run of drops: the notice itself must not become a flood.
        this.send({
          type: 'error',
          code: SignalErrorCode.RateLimited,
          message: 'too many messages; dropping until you slow down',
          fatal: false,
        });
      }
      return;
    }
    if (isBinary)
      return this.reject(SignalErrorCode.BadMessage, 'binary frames are not part of the protocol; send JSON text');
    let raw: unknown;
    try {
      raw = JSON.parse(frameText(data));
    } catch {
      return this.reject(SignalErrorCode.BadJson, 'the frame is not valid JSON');
    }
    const type =
      typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as { type?: unknown }).type : undefined;
    if (typeof type !== 'string' || !Object.hasOwn(clientMessageSchemas, type)) {
      this.ctx.metrics.message('in', 'other');
      const shown = typeof type === 'string' ? `'${type.slice(0, 40)}'` : 'missing';
      return this.reject(
        SignalErrorCode.UnknownType,
        `unknown message type ${shown}; expected one of ${Object.keys(clientMessageSchemas).join(', ')}`,
      );
    }
    this.ctx.metrics.message('in', type);
    const parsed = clientMessageSchemas[type as ClientMessageType].safeParse(raw);
    if (!parsed.success) {
      // Progress outside what the schema allows (accuracy above 1, a negative step...) is never shown.
      if (type === 'progress') this.ctx.metrics.progressRefused('invalid');
      return this.reject(SignalErrorCode.BadMessage, `bad '${type}' message: ${describeIssues(parsed.error)}`);
    }
    this.dispatch(parsed.data as ClientMessage);
  }

  private dispatch(msg: ClientMessage): void {
    if (msg.type === 'join') return this.onJoin(msg);
    if (!this.member || !this.job) return this.reject(SignalErrorCode.NotJoined, `send 'join' before '${msg.type}'`);
    switch (msg.type) {
      case 'signal': {
        const refused = this.job.relay(this.member, msg.epoch, msg.to, msg.data);
        if (refused) this.sendError(refused.code, refused.message, false);
        return;
      }
      case 'progress': {
        const { type: _type, ...progress } = msg;
        const refused = this.job.progressRefusal(this.member, progress);
        if (refused) {
          this.ctx.metrics.progressRefused(refused.reason);
          return this.sendError(SignalErrorCode.BadProgress, refused.message, false);
        }
        this.member.progress = this.job.showProgress(this.member, progress, Date.now());
        return;
      }
      case 'pong':
        return;
      case 'report': {
        const ejected = this.job.report(this.member, msg.peerId, msg.reason);
        if (ejected) this.ctx.log(`job ${this.job.id}: ejected ${ejected.name ?? ejected.peerId} (${msg.reason})`);
        return;
      }
      case 'attest': {
        const promoted = this.job.attest(this.member, msg.epoch);
        if (promoted.length)
          this.ctx.log(
            `job ${this.job.id}: ${promoted.map((m) => m.name ?? m.peerId).join(', ')} now vote${promoted.length === 1 ? 's' : ''} (every member of epoch ${msg.epoch} completed a step)`,
          );
        return;
      }
      case 'probe-signal': {
        const refused = this.job.probeSignal(this.member, msg.probe, msg.data);
        if (refused) this.sendError(refused.code, refused.message, false);
        return;
      }
      case 'probe-ok': {
        const admitted = this.job.probeOk(this.member, msg.probe);
        if (admitted)
          this.ctx.log(
            `job ${this.job.id}: admitted ${admitted.name ?? admitted.peerId} (it echoed with its neighbours), epoch ${this.job.epoch}, size ${this.job.size}`,
          );
        return;
      }
      case 'leave':
        this.leaveJob(PeerLeftReason.Left, msg.reason);
        this.closing = true;
        this.ws.close(CloseCode.Normal, 'left');
        return;
    }
  }

  private onJoin(msg: JoinMsg): void {
    if (this.member)
      return this.sendError(
        SignalErrorCode.AlreadyJoined,
        `already joined job '${this.job?.id}'; open another connection to join another job`,
        false,
      );
    if (msg.protocol !== PROTOCOL_VERSION) {
      return this.fail(
        SignalErrorCode.BadVersion,
        `protocol ${msg.protocol} is not supported; this server speaks ${PROTOCOL_VERSION}: update the client`,
      );
    }
    const keyProblem = signingKeyProblem(msg.signingKey);
    if (keyProblem)
      return this.fail(
        SignalErrorCode.SigningKeyRequired,
        `${keyProblem}: every member signs the check values it publishes, and a member whose key cannot be read would turn signing off for its whole ring. Join with a ringtrain client (each makes an Ed25519 or ECDSA P-256 key); a page needs a secure context (https, or localhost)`,
      );
    const job = this.ctx.job(msg.job);
    if (!job) return this.fail(SignalErrorCode.NoSuchJob, `no job '${msg.job}' on this server; check the job id`);
    if (!this.ctx.admission.mayTryToken(this.addressKey)) {
      this.ctx.metrics.refused(RefusalReason.BadTokens);
      return this.fail(
        SignalErrorCode.TooManyBadTokens,
        'too many wrong tokens from your address lately; check the token, and try again in a few seconds',
      );
    }
    const refusal = job.refusal(msg.token, this.addressKey, msg.name);
    if (refusal?.code === SignalErrorCode.BadToken) this.ctx.admission.badToken(this.addressKey);
    if (refusal) return this.fail(refusal.code, refusal.message);
    if (this.joinTimer) clearTimeout(this.joinTimer);
    this.joinTimer = null;
    // Joined: from now on the job counts this connection (maxPeers), not the handshake limits.
    this.ctx.admission.handshakeEnded(this);
    const member: Member = {
      peerId: randomUUID(),
      runtime: msg.runtime,
      name: msg.name,
      capabilities: msg.capabilities,
      signingKey: msg.signingKey,
      joinedAt: Date.now(),
      address: this.addressKey,
      send: (m) => this.send(m),
      eject: (why) => this.eject(why),
      refuse: (code, message) => this.fail(code, message),
    };
    this.member = member;
    this.job = job;
    this.send({
      type: 'welcome',
      protocol: PROTOCOL_VERSION,
      peerId: member.peerId,
      job: { id: job.id, config: job.config },
      heartbeatMs: this.ctx.heartbeatMs,
      missedHeartbeats: this.ctx.missedHeartbeats,
      ...this.ctx.iceFor(job, member.peerId),
    });
    const as = job.join(member);
    this.ctx.log(
      as === 'member'
        ? `job ${job.id}: ${member.name ?? member.peerId} (${member.runtime}) joined, epoch ${job.epoch}, size ${job.size}`
        : `job ${job.id}: ${member.name ?? member.peerId} (${member.runtime}) is a candidate; it echoes with its would-be neighbours before it is admitted`,
    );
  }

  private leaveJob(reason: PeerLeftReason, detail?: string): void {
    const member = this.member;
    const job = this.job;
    this.member = null;
    this.job = null;
    if (!member || !job) return;
    if (job.remove(member, reason, detail)) {
      this.ctx.metrics.peerLeft(job.id, reason);
      this.ctx.log(
        `job ${job.id}: ${member.name ?? member.peerId} left (${reason}${detail ? `: ${detail}` : ''}), epoch ${job.epoch}, size ${job.size}`,
      );
    }
  }

  private onClose(): void {
    if (this.joinTimer) clearTimeout(this.joinTimer);
    if (this.cutTimer) clearTimeout(this.cutTimer);
    this.joinTimer = null;
    this.cutTimer = null;
    this.ctx.admission.handshakeEnded(this);
    this.closing = true;
    this.leaveJob(this.closeReason.reason, this.closeReason.detail);
  }
}
