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
 * This file is the join handshake (open the socket, join, wait for the welcome
 * and the first membership) and the module callers import. The joined client
 * it returns is in signaling-client.ts, its per-epoch signal log in
 * epoch-signals.ts, its watch on the server's silence in server-watchdog.ts,
 * and the socket type and URL rules in socket.ts.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { EventBus } from '../core/events.ts';
import { detectRuntime, type RuntimeName } from '../core/runtime.ts';
import {
  PROTOCOL_VERSION,
  describeIssues,
  serverMessageSchema,
  type Capabilities,
  type ServerMessage,
  type WelcomeMsg,
} from './protocol.ts';
import { SignalingClient } from './signaling-client.ts';
import {
  describeTlsFailure,
  OPEN,
  probeTlsFailure,
  signalingError,
  signalingUrl,
  socketFailure,
  type WebSocketConstructor,
  type WebSocketLike,
} from './socket.ts';

import { newSigningKeys } from './signing-keys.ts';
export { SignalingClient, type Membership } from './signaling-client.ts';
export { signalingUrl, type WebSocketConstructor, type WebSocketLike } from './socket.ts';

export interface ConnectOptions {
  job: string;
  token: string;
  /** Shown to other peers and on the page. */
  name?: string;
  /** Default: the runtime this code runs in. */
  runtime?: RuntimeName;
  capabilities?: Capabilities;
  /**
   * The public key this peer signs its check values with (src/distributed/session/ring-keys.ts). The
   * server refuses a join without one; a client given none makes a key pair of its own and joins with
   * its public half (a client that signs nothing, such as a test's or a watcher's).
   */
  signingKey?: string;
  /** Default: globalThis.WebSocket (browser, Deno). */
  WebSocket?: WebSocketConstructor;
  /** How long to wait for the connection, the welcome and the first membership. Default 10 s. */
  timeoutMs?: number;
  /** Membership and peer-lost events are emitted here too. */
  events?: EventBus;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Connects and joins `job`; resolves once the first membership arrived, or, joining a running job
 * that proves its joiners, once the server said this peer is a candidate (`client.candidacy`; its
 * first membership comes after its probes: `waitForReady`).
 */
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
  return withSigningKey(options).then(
    (joining) =>
      new Promise<SignalingClient>((resolve, reject) => {
        let ws: WebSocketLike;
        try {
          ws = new WS(wsUrl);
        } catch (err) {
          return reject(signalingError(`cannot open a WebSocket to ${wsUrl}: ${String(err)}`, { url: wsUrl }));
        }
        new JoinHandshake(ws, wsUrl, joining, resolve, reject);
      }),
  );
}

/** `options` with a signing key: the one given, else a fresh one's public half (none where the runtime has no WebCrypto signing: the server then says why it refuses). */
async function withSigningKey(options: ConnectOptions): Promise<ConnectOptions> {
  if (options.signingKey) return options;
  const made = await newSigningKeys();
  return made ? { ...options, signingKey: made.publicText } : options;
}

/** One socket's way from open to joined: the join, the welcome, the first membership (or candidacy). */
class JoinHandshake {
  private client: SignalingClient | null = null;
  private settled = false;
  /** The server's fatal refusal, for the close that follows it. */
  private refusal: RingtrainError | null = null;
  /** What the runtime said went wrong (ws: the Error and its code; Deno: a message), for the close that follows. */
  private failure: ReturnType<typeof socketFailure>;
  private readonly timer: ReturnType<typeof setTimeout>;

  constructor(
    private readonly ws: WebSocketLike,
    private readonly wsUrl: string,
    private readonly options: ConnectOptions,
    private readonly resolve: (client: SignalingClient) => void,
    private readonly reject: (err: RingtrainError) => void,
  ) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.timer = setTimeout(
      () =>
        this.fail(
          signalingError(`no answer from the signaling server at ${wsUrl} within ${timeoutMs} ms`, { url: wsUrl }),
        ),
      timeoutMs,
    );
    ws.onopen = () => ws.send(JSON.stringify(joinMessage(options)));
    ws.onerror = (ev: never) => {
      this.failure ??= socketFailure(ev);
    };
    ws.onclose = (ev) => void this.onClose(ev);
    ws.onmessage = (ev) => this.onMessage(ev.data);
  }

  private fail(err: RingtrainError): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.client?.end(err);
    if (this.ws.readyState === OPEN) this.ws.close(1000);
    this.reject(err);
  }

  private async onClose(ev: { code: number; reason?: string }): Promise<void> {
    const { client, refusal, failure, wsUrl } = this;
    // A certificate problem is not an absent server: say which, and what to do.
    const tls =
      client || refusal || this.settled ? null : (describeTlsFailure(wsUrl, failure) ?? (await probeTlsFailure(wsUrl)));
    const said = typeof failure?.message === 'string' && failure.message ? `: ${failure.message}` : '';
    const err =
      refusal ??
      signalingError(
        client
          ? `the signaling server at ${wsUrl} closed the connection (code ${ev.code}${ev.reason ? `, ${ev.reason}` : ''})`
          : (tls ??
              `cannot reach the signaling server at ${wsUrl} (code ${ev.code}${said}); is it running? (ringtrain server)`),
        { url: wsUrl, closeCode: ev.code, ...(tls && failure?.code ? { tlsError: String(failure.code) } : {}) },
      );
    if (!this.settled) return this.fail(err);
    client?.end(err);
  }

  private onMessage(data: unknown): void {
    let msg: ServerMessage;
    try {
      const parsed = serverMessageSchema.safeParse(JSON.parse(String(data)));
      if (!parsed.success) throw new Error(describeIssues(parsed.error));
      msg = parsed.data;
    } catch (err) {
      // A server that speaks something else: not ours to guess at.
      const e = signalingError(
        `the server at ${this.wsUrl} sent a message this client does not understand: ${String(err)}`,
      );
      return this.settled ? this.client?.end(e) : this.fail(e);
    }
    if (this.client) {
      this.client.handle(msg);
      if (!this.settled && (this.client.membership || this.client.candidacy)) {
        this.settled = true;
        clearTimeout(this.timer);
        this.resolve(this.client);
      }
      return;
    }
    if (msg.type === 'error') {
      this.refusal = signalingError(`signaling server refused to join job '${this.options.job}': ${msg.message}`, {
        code: msg.code,
        fatal: msg.fatal,
      });
      if (msg.fatal) this.fail(this.refusal);
      return;
    }
    // Pings before the welcome cannot happen; anything else before it is ignored.
    if (msg.type === 'welcome') this.welcomed(msg);
  }

  private welcomed(msg: WelcomeMsg): void {
    if (msg.protocol !== PROTOCOL_VERSION) {
      return this.fail(
        signalingError(`server speaks protocol ${msg.protocol}, this client ${PROTOCOL_VERSION}: update one of them`),
      );
    }
    const client = new SignalingClient(
      this.ws,
      this.wsUrl,
      msg.peerId,
      msg.job,
      msg.heartbeatMs,
      msg.missedHeartbeats,
      this.options.events,
    );
    client.ice = { iceServers: msg.iceServers, iceTransportPolicy: msg.iceTransportPolicy };
    this.client = client;
  }
}

/** The protocol's first message. */
function joinMessage(options: ConnectOptions): object {
  return {
    type: 'join',
    protocol: PROTOCOL_VERSION,
    job: options.job,
    token: options.token,
    runtime: options.runtime ?? detectRuntime(),
    ...(options.name ? { name: options.name } : {}),
    ...(options.capabilities ? { capabilities: options.capabilities } : {}),
    ...(options.signingKey ? { signingKey: options.signingKey } : {}),
  };
}
