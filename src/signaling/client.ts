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
  /** Default: globalThis.WebSocket (browser, Deno). */
  WebSocket?: WebSocketConstructor;
  /** How long to wait for the connection, the welcome and the first membership. Default 10 s. */
  timeoutMs?: number;
  /** Membership and peer-lost events are emitted here too. */
  events?: EventBus;
}

const DEFAULT_TIMEOUT_MS = 10_000;

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
    const timer = setTimeout(
      () =>
        fail(signalingError(`no answer from the signaling server at ${wsUrl} within ${timeoutMs} ms`, { url: wsUrl })),
      timeoutMs,
    );

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
    // What the runtime said went wrong (ws: the Error and its code; Deno: a message), for the close that follows.
    let failure: ReturnType<typeof socketFailure>;
    ws.onerror = (ev: never) => {
      failure ??= socketFailure(ev);
    };
    ws.onclose = async (ev) => {
      // A certificate problem is not an absent server: say which, and what to do.
      const tls =
        client || refusal || settled ? null : (describeTlsFailure(wsUrl, failure) ?? (await probeTlsFailure(wsUrl)));
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
        const e = signalingError(
          `the server at ${wsUrl} sent a message this client does not understand: ${String(err)}`,
        );
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
        refusal = signalingError(`signaling server refused to join job '${options.job}': ${msg.message}`, {
          code: msg.code,
          fatal: msg.fatal,
        });
        if (msg.fatal) fail(refusal);
        return;
      }
      if (msg.type === 'welcome') {
        if (msg.protocol !== PROTOCOL_VERSION) {
          return fail(
            signalingError(
              `server speaks protocol ${msg.protocol}, this client ${PROTOCOL_VERSION}: update one of them`,
            ),
          );
        }
        client = new SignalingClient(
          ws,
          wsUrl,
          msg.peerId,
          msg.job,
          msg.heartbeatMs,
          msg.missedHeartbeats,
          options.events,
        );
        client.ice = { iceServers: msg.iceServers, iceTransportPolicy: msg.iceTransportPolicy };
      }
      // Pings before the welcome cannot happen; anything else before it is ignored.
    };
  });
}
