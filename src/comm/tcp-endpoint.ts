/**
 * What the mesh needs of a TCP transport, without touching `node:net`: an
 * address to advertise, a way to dial a peer and a way to accept one. Node
 * and Deno build it in tcp-link.node.ts and hand it in (as they hand in
 * `wrtc`); the page has none, so its links are all WebRTC.
 */
import type { Link } from './link.ts';

/** Which link of which epoch: what both ends must agree on before a frame moves. */
export interface LinkIdentity {
  job: string;
  epoch: number;
  /** The dialling rank (the lower one of the pair). */
  from: number;
  /** The listening rank. */
  to: number;
}

export interface TcpEndpoint {
  /** host:port the other peers dial to reach this one. */
  readonly address: string;
  /** With TLS (`--link-tls`): the SHA-256 fingerprint of the certificate this endpoint serves; dialers pin it. */
  readonly tlsFingerprint?: string;
  /**
   * An authenticated link to the listener at `address` ([host]:port), proving `key` and checking
   * that the listener holds it too; over TLS when `fingerprint` is given, and only to a listener
   * whose certificate has that fingerprint. Rejects on any failure, at the latest after `timeoutMs`.
   */
  dial(address: string, id: LinkIdentity, key: Uint8Array, timeoutMs: number, fingerprint?: string): Promise<Link>;
  /** Waits for rank `id.from` to dial us for this link; `cancel` rejects `link` and refuses it from then on. */
  accept(id: LinkIdentity, key: Uint8Array): { link: Promise<Link>; cancel(reason: Error): void };
}

/** Splits "host:port" or "[v6]:port"; null when it is not one. */
export function splitHostPort(address: string): { host: string; port: number } | null {
  const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(address.trim());
  if (!m) return null;
  const port = Number(m[3]);
  if (port < 0 || port > 65535) return null;
  return { host: m[1] ?? m[2], port };
}

/** Joins host and port, bracketing an IPv6 host. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
