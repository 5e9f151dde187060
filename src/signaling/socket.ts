/**
 * The WebSocket the signaling client talks over, and the error it gives when
 * that goes wrong. Only the part of the WebSocket API the client uses is
 * named here, so the browser's, Deno's and the `ws` package's sockets all
 * fit, and a test can pass its own. Kept apart so that both the join
 * handshake (client.ts) and the joined client (signaling-client.ts) can use
 * it without importing each other.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { WS_PATH } from './protocol.ts';

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

/** `WebSocket.OPEN`, which not every runtime has as a static. */
export const OPEN = 1;

export function signalingError(message: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.Signaling, message, detail);
}

/** http(s)://host[:port] becomes ws(s)://host[:port]/ws; a ws(s) URL is used as given. */
export function signalingUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `'${url}' is not a URL; give the server's address, like http://127.0.0.1:8080`,
    );
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    if (u.pathname === '/' || u.pathname === '') u.pathname = WS_PATH;
  } else if (u.protocol !== 'ws:' && u.protocol !== 'wss:') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `signaling URL must be http(s) or ws(s), got '${u.protocol}'`);
  }
  return u.toString();
}

/** TLS failures as Node (error codes) and Deno (rustls's words) report them, and what to do about each. */
const TLS_PROBLEMS: { match: RegExp; what: string; todo: (host: string) => string }[] = [
  {
    match:
      /SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_UNTRUSTED|UnknownIssuer|self[- ]signed/i,
    what: 'is not signed by an authority this runtime trusts',
    todo: () =>
      'if it is your own CA or a self-signed certificate, trust it: NODE_EXTRA_CA_CERTS=ca.pem (Node) or DENO_CERT=ca.pem (Deno); a browser must import it',
  },
  {
    match: /CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|Expired|NotValidYet/i,
    what: 'is expired or not yet valid',
    todo: () => "renew the server's certificate (ringtrain server --tls-cert), and check both machines' clocks",
  },
  {
    match: /ERR_TLS_CERT_ALTNAME_INVALID|NotValidForName|Hostname\/IP does not match|altnames/i,
    what: 'does not name the address connected to',
    todo: (host) =>
      `connect with an address the certificate names, or give the server a certificate whose subjectAltName includes ${host}`,
  },
  {
    match: /CERT_REVOKED|Revoked|BadSignature|certificate/i,
    what: 'was refused',
    todo: () => "check the server's certificate (ringtrain server --tls-cert) and the authorities this runtime trusts",
  },
];

/** A socket's failure in words, when it is a TLS certificate problem; null otherwise. */
export function describeTlsFailure(
  wsUrl: string,
  failure: { code?: unknown; message?: unknown } | undefined,
): string | null {
  if (!failure || !wsUrl.startsWith('wss:')) return null;
  const code = typeof failure.code === 'string' ? failure.code : '';
  const message = typeof failure.message === 'string' ? failure.message : '';
  const text = `${code} ${message}`;
  const problem = TLS_PROBLEMS.find((p) => p.match.test(text));
  if (!problem) return null;
  const host = new URL(wsUrl).hostname;
  const cause = code && !message.includes(code) ? `${code}: ${message}` : message || code;
  return `the signaling server at ${wsUrl} answered, but its TLS certificate ${problem.what} (${cause}): ${problem.todo(host)}`;
}

/** What a socket's error event carries (ws: the Error with its code; Deno and browsers: a message, if anything). */
export function socketFailure(ev: unknown): { code?: unknown; message?: unknown } | undefined {
  if (!ev || typeof ev !== 'object') return undefined;
  const inner = (ev as { error?: unknown }).error;
  const e =
    inner && typeof inner === 'object' ? (inner as { code?: unknown; message?: unknown; cause?: unknown }) : undefined;
  const code = e?.code ?? (e?.cause as { code?: unknown } | undefined)?.code;
  const message = e?.message ?? (ev as { message?: unknown }).message;
  return code === undefined && message === undefined ? undefined : { code, message };
}

/**
 * Deno's WebSocket reports an untrusted certificate as "received fatal alert: NoApplicationProtocol",
 * which names no certificate; its fetch says "invalid peer certificate: UnknownIssuer". So when a wss
 * connection fails without saying why in TLS terms, one https request to the same server asks again.
 * Null when that finds no certificate problem either (or the runtime says nothing: a browser).
 */
export async function probeTlsFailure(wsUrl: string): Promise<string | null> {
  if (!wsUrl.startsWith('wss:') || typeof fetch !== 'function') return null;
  const u = new URL(wsUrl);
  u.protocol = 'https:';
  u.pathname = '/healthz';
  u.search = '';
  try {
    const res = await fetch(u, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return null;
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
    const message = [e.message, e.cause?.message].filter((m) => typeof m === 'string' && m).join(': ');
    return describeTlsFailure(wsUrl, { code: e.cause?.code ?? e.code, message });
  }
}
