/**
 * Who may hold a socket open on the server, so that one client cannot lock the
 * others out:
 *  - sockets per remote address (HTTP and WebSocket together, counted from the
 *    TCP accept): beyond the limit a new socket is cut at once;
 *  - handshakes per remote address: WebSockets upgraded but not yet joined; beyond
 *    the limit an upgrade is answered 429;
 *  - handshakes in all: beyond the limit the one that has waited longest is
 *    closed to make room (a peer joins within a round trip of its upgrade, so
 *    only a socket that sits silent is ever the oldest);
 *  - wrong tokens per remote address: a few in a burst, then one every few
 *    seconds, so a token cannot be guessed by trying;
 *  - the deadline for the first message (the join) is the Connection's.
 * A joined connection no longer counts as a handshake: it is counted by its job
 * (maxPeers), not against any server-wide cap.
 */
import { isIPv6 } from 'node:net';

export interface AdmissionLimits {
  /** TCP sockets one remote address may hold open (HTTP and WebSocket). */
  maxSocketsPerAddress: number;
  /** WebSockets one remote address may hold upgraded and not yet joined. */
  maxHandshakesPerAddress: number;
  /** WebSockets upgraded and not yet joined, from everyone; beyond it the oldest is closed. */
  maxHandshakes: number;
  /** Wrong tokens one address may try in a burst; then one more per `badTokenRefillMs`. */
  badTokenBurst: number;
  badTokenRefillMs: number;
  /**
   * Members one address may hold in one job (0: no limit), for jobs whose config names none
   * (`maxPeersPerAddress`). A job's one token is shared by all its peers, so its per-token
   * limit is `maxPeers`; this is what bounds one machine's sockets among them.
   */
  maxPeersPerAddress: number;
  /**
   * Joiners of one running job still proving their links (staged admission, candidates.ts), and
   * how many of them one address may hold: ghosts queue here, never in a ring, and cannot crowd
   * out honest joiners for long (each is dropped at its job's admitTimeoutMs).
   */
  maxCandidates: number;
  maxCandidatesPerAddress: number;
}

export const DEFAULT_ADMISSION_LIMITS: AdmissionLimits = {
  maxSocketsPerAddress: 256,
  maxHandshakesPerAddress: 16,
  maxHandshakes: 1024,
  // Enough for someone mistyping a token, far too few for guessing one.
  badTokenBurst: 10,
  badTokenRefillMs: 6000,
  // Off by default: `run -np N` and tests put every worker on one address.
  maxPeersPerAddress: 0,
  // A few joiners at once is a busy job; one machine rarely adds more than a couple at a time.
  maxCandidates: 8,
  maxCandidatesPerAddress: 4,
};

/** Why a socket was refused or closed early: bounded, so /metrics can label by it. */
export const RefusalReason = {
  AddressSockets: 'address-sockets',
  AddressHandshakes: 'address-handshakes',
  Evicted: 'evicted',
  JoinTimeout: 'join-timeout',
  BadTokens: 'bad-tokens',
} as const;
export type RefusalReason = (typeof RefusalReason)[keyof typeof RefusalReason];

/**
 * The key one client's sockets are counted under: the IPv4 address (an
 * IPv4-mapped IPv6 address as IPv4), or an IPv6 address's /64, since whoever
 * holds one IPv6 address usually holds its whole /64.
 */
export function addressKey(remoteAddress: string | undefined): string {
  if (!remoteAddress) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remoteAddress);
  if (mapped) return mapped[1];
  if (!isIPv6(remoteAddress)) return remoteAddress;
  const [head, tail = ''] = remoteAddress.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = remoteAddress.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/** Something upgraded and not yet joined, that the server can close to make room. */
export interface Handshake {
  evict(): void;
}

/** Beyond this many addresses with recent wrong tokens, the refilled ones are swept out. */
const MAX_TRACKED_ADDRESSES = 10_000;

export class Admission {
  private readonly sockets = new Map<string, number>();
  /** Handshakes in arrival order (a Map keeps insertion order: the first is the oldest). */
  private readonly handshakes = new Map<Handshake, string>();
  private readonly handshakesPerAddress = new Map<string, number>();
  /** Wrong-token allowance per address: what is left, and when it was last topped up. */
  private readonly badTokens = new Map<string, { left: number; at: number }>();

  constructor(
    readonly limits: AdmissionLimits,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Whether `key` may try a token now (false: it tried too many wrong ones lately). */
  mayTryToken(key: string): boolean {
    return (this.allowance(key)?.left ?? this.limits.badTokenBurst) >= 1;
  }

  /** `key` gave a wrong token. */
  badToken(key: string): void {
    const a = this.allowance(key) ?? { left: this.limits.badTokenBurst, at: this.clock() };
    a.left = Math.max(0, a.left - 1);
    this.badTokens.set(key, a);
    // Addresses whose allowance has refilled need no entry: drop them now and then, so the map stays small.
    if (this.badTokens.size > MAX_TRACKED_ADDRESSES) for (const k of [...this.badTokens.keys()]) this.allowance(k);
  }

  /** The allowance of an address that gave wrong tokens lately, topped up to now; undefined when it is full again. */
  private allowance(key: string): { left: number; at: number } | undefined {
    const a = this.badTokens.get(key);
    if (!a) return undefined;
    const t = this.clock();
    a.left = Math.min(this.limits.badTokenBurst, a.left + (t - a.at) / this.limits.badTokenRefillMs);
    a.at = t;
    if (a.left < this.limits.badTokenBurst) return a;
    this.badTokens.delete(key);
    return undefined;
  }

  get openHandshakes(): number {
    return this.handshakes.size;
  }

  /** A TCP socket was accepted: false when its address already holds too many (cut it). */
  socketOpened(key: string): boolean {
    const n = this.sockets.get(key) ?? 0;
    if (n >= this.limits.maxSocketsPerAddress) return false;
    this.sockets.set(key, n + 1);
    return true;
  }

  socketClosed(key: string): void {
    const n = (this.sockets.get(key) ?? 1) - 1;
    if (n > 0) this.sockets.set(key, n);
    else this.sockets.delete(key);
  }

  /** Whether `key` may start another handshake. */
  mayUpgrade(key: string): boolean {
    return (this.handshakesPerAddress.get(key) ?? 0) < this.limits.maxHandshakesPerAddress;
  }

  /**
   * Counts a new handshake; if that puts the server over its cap, the oldest
   * handshakes are evicted (their `evict` runs and they are forgotten) and returned.
   */
  handshakeStarted(h: Handshake, key: string): number {
    let evicted = 0;
    while (this.handshakes.size >= this.limits.maxHandshakes) {
      const oldest = this.handshakes.keys().next().value!;
      this.handshakeEnded(oldest);
      oldest.evict();
      evicted++;
    }
    this.handshakes.set(h, key);
    this.handshakesPerAddress.set(key, (this.handshakesPerAddress.get(key) ?? 0) + 1);
    return evicted;
  }

  /** The handshake joined, failed or closed (no-op if already ended). */
  handshakeEnded(h: Handshake): void {
    const key = this.handshakes.get(h);
    if (key === undefined) return;
    this.handshakes.delete(h);
    const n = (this.handshakesPerAddress.get(key) ?? 1) - 1;
    if (n > 0) this.handshakesPerAddress.set(key, n);
    else this.handshakesPerAddress.delete(key);
  }
}
