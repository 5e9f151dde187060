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
