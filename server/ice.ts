/**
 * The STUN and TURN servers a job's peers use to find a path to each other
 * across NATs, and the short-lived TURN credentials handed to each peer in
 * its `welcome`.
 *
 * Credentials follow the TURN REST scheme that coturn checks with
 * `use-auth-secret` / `static-auth-secret`: the username is
 * `<expiry, unix seconds>:<peer id>` and the password is
 * base64(HMAC-SHA1(secret, username)). coturn recomputes the HMAC with the
 * same secret and refuses a username whose expiry has passed, so the secret
 * never leaves this server and a leaked credential dies on its own.
 */
import { createHmac } from 'node:crypto';
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import type { IceServer, IceTransportPolicy } from '../src/signaling/protocol.ts';

/** How long minted TURN credentials stay valid by default: a day, longer than most jobs (coturn re-checks them on every refresh). */
export const DEFAULT_TURN_TTL_S = 24 * 60 * 60;

/** A job's STUN/TURN servers (URLs only: public knowledge, but kept out of the public job config all the same). */
export interface JobIce {
  /** stun:host[:port] URLs. */
  stun?: string[];
  /** turn:host[:port][?transport=udp|tcp] or turns:… URLs; need the server's TURN secret. */
  turn?: string[];
  /** 'relay': peers connect through TURN only. Default 'all'. */
  transportPolicy?: IceTransportPolicy;
}

/** The server-wide ICE settings: the default servers of every job, and the secret shared with the TURN server. */
export interface IceOptions extends JobIce {
  /** coturn's static-auth-secret. Never logged, never sent to a peer. */
  turnSecret?: string;
  /** Lifetime of minted credentials, seconds. Default DEFAULT_TURN_TTL_S. */
  credentialTtlS?: number;
}

/** What a peer's welcome carries. */
export interface PeerIce {
  iceServers?: IceServer[];
  iceTransportPolicy?: IceTransportPolicy;
}

function invalid(message: string): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, message);
}

const URL_FORMS = {
  stun: /^stuns?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/,
  turn: /^turns?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(\?transport=(udp|tcp))?$/,
} as const;

/**
 * Checks the URLs now, naming the bad one: a browser's RTCPeerConnection throws on a
 * malformed URL, which would otherwise surface far away, in every peer, at connect time.
 */
export function checkIceUrls(kind: 'stun' | 'turn', urls: string[], where: string): void {
  for (const url of urls) {
    if (!URL_FORMS[kind].test(url)) {
      const example = kind === 'stun' ? 'stun:stun.example.org:3478' : 'turn:turn.example.org:3478?transport=udp';
      throw invalid(`${where}: '${url}' is not a ${kind.toUpperCase()} URL; write it like ${example}`);
    }
  }
}

/** Checks a job's ICE settings against what the server can mint; throws naming the problem. */
export function checkJobIce(ice: JobIce, server: IceOptions, where: string): void {
  checkIceUrls('stun', ice.stun ?? [], where);
  checkIceUrls('turn', ice.turn ?? [], where);
  if ((ice.turn?.length ?? 0) > 0 && !server.turnSecret) {
    throw invalid(
      `${where} lists TURN servers, but the server has no TURN secret to mint their credentials; give --turn-secret-file (the file holding coturn's static-auth-secret)`,
    );
  }
  if (ice.transportPolicy === 'relay' && !(ice.turn?.length ?? 0)) {
    throw invalid(`${where}: relay-only ICE (--ice-transport relay) needs a TURN server (--turn URL)`);
  }
}

/** Checks the server-wide options (their servers are every job's default). */
export function checkIceOptions(o: IceOptions): void {
  if (o.turnSecret !== undefined && o.turnSecret.length === 0)
    throw invalid("the TURN secret is empty; put coturn's static-auth-secret in --turn-secret-file");
  if (o.turnSecret && !(o.turn?.length ?? 0))
    throw invalid('--turn-secret-file is given but no --turn URL: give the TURN server it belongs to');
  const ttl = o.credentialTtlS ?? DEFAULT_TURN_TTL_S;
  if (!Number.isInteger(ttl) || ttl < 60)
    throw invalid(`TURN credential lifetime must be a whole number of seconds >= 60, got ${ttl}`);
  checkJobIce(o, o, 'server ICE options');
}

/** A TURN REST credential for `user`, valid until `expiresAtS` (unix seconds). */
export function turnCredential(
  secret: string,
  user: string,
  expiresAtS: number,
): { username: string; credential: string } {
  const username = `${Math.floor(expiresAtS)}:${user}`;
  return { username, credential: createHmac('sha1', secret).update(username).digest('base64') };
}

/** The ICE servers for one peer of a job, with fresh TURN credentials for it. `nowMs`: Date.now(). */
export function iceForPeer(job: JobIce, server: IceOptions, peerId: string, nowMs: number): PeerIce {
  const iceServers: IceServer[] = [];
  if (job.stun?.length) iceServers.push({ urls: job.stun });
  if (job.turn?.length && server.turnSecret) {
    const expires = nowMs / 1000 + (server.credentialTtlS ?? DEFAULT_TURN_TTL_S);
    iceServers.push({ urls: job.turn, ...turnCredential(server.turnSecret, peerId, expires) });
  }
  const out: PeerIce = {};
  if (iceServers.length) out.iceServers = iceServers;
  if (job.transportPolicy === 'relay') out.iceTransportPolicy = 'relay';
  return out;
}
