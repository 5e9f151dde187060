/**
 * startServer's options: what each means, their defaults, and the check that
 * refuses a bad one (naming it) before anything is opened.
 */
import { createHash } from 'node:crypto';
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { packagePath } from '../src/core/package-root.node.ts';
import { DEFAULT_MAX_FRAME_BYTES, type JobSpec, type MembershipMsg } from '../src/signaling/protocol.ts';
import { DEFAULT_ADMISSION_LIMITS, type AdmissionLimits } from './admission.ts';
import { checkIceOptions, type IceOptions } from './ice.ts';
import { DEFAULT_RATE_LIMIT, type RateLimitOptions } from './rate-limit.ts';
import type { MembershipPeer } from './jobs.ts';

/** The built page, in the package (the repository's, or an install's): independent of the working directory. */
export const DEFAULT_STATIC_DIR = packagePath('demo', 'dist');

export interface ServerOptions {
  /** 0 picks a free port. Default 0. */
  port?: number;
  /** Default 127.0.0.1: only this machine. Use 0.0.0.0 to accept other machines. */
  host?: string;
  jobs?: JobSpec[];
  /** Folder of the built page; null serves no files. Default demo/dist. */
  staticDir?: string | null;
  heartbeatMs?: number;
  missedHeartbeats?: number;
  /** Largest WebSocket frame accepted; bigger ones close the connection (1009). */
  maxFrameBytes?: number;
  rateLimit?: Partial<RateLimitOptions>;
  /** A connection whose first message (its join) has not come this long after the upgrade is closed. Default 5 s. */
  joinTimeoutMs?: number;
  /** Per-address and server-wide limits on sockets and on connections not yet joined. */
  limits?: Partial<AdmissionLimits>;
  /** PEM certificate (chain) and key: serve https and wss instead of http and ws. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Unsent bytes after which a peer that does not read is dropped. */
  maxBufferedBytes?: number;
  /**
   * STUN/TURN servers for every job that names none of its own, and the secret
   * shared with the TURN server (coturn's static-auth-secret) to mint each peer's
   * short-lived credentials. Default: none (peers on one machine or LAN need none).
   */
  ice?: IceOptions;
  /**
   * Files a job's peers may download from this server by their SHA-256: a job's
   * text (or table), which a worker reads from its own disk but a browser tab
   * cannot. Each is served only to holders of a job's token, and only to a job
   * whose settings name its hash (GET /api/jobs/:id/files/:sha256).
   */
  files?: Uint8Array[];
  /**
   * Told of every membership change of a job (a join, a leave), with its members in rank order,
   * before any member hears of it: `ringtrain launch` names its workers' ranks with it.
   */
  onMembership?: (job: string, peers: readonly MembershipPeer[], change: MembershipMsg['change']) => void;
  /** Where log lines go; default nowhere. */
  log?: (line: string) => void;
}

const DEFAULTS = {
  port: 0,
  host: '127.0.0.1',
  heartbeatMs: 5000,
  missedHeartbeats: 3,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  joinTimeoutMs: 5000,
  maxBufferedBytes: 8 * 1024 * 1024,
};

/** The options with every default filled in, checked. */
export type ServerSettings = Omit<
  ServerOptions,
  'rateLimit' | 'limits' | 'staticDir' | 'ice' | 'log' | 'files' | 'onMembership'
> &
  typeof DEFAULTS & {
    rateLimit: RateLimitOptions;
    limits: AdmissionLimits;
    staticDir: string | null;
    ice: IceOptions;
    log: (line: string) => void;
    /** The files by hex SHA-256. */
    files: ReadonlyMap<string, Uint8Array>;
  };

function checkPositive(name: string, v: number, min = 1): void {
  if (!Number.isFinite(v) || v < min) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `server option ${name} must be a number >= ${min}, got ${v}`);
  }
}

/** Fills in the defaults and checks every option, throwing InvalidArgument for the first bad one. */
export function resolveOptions(options: ServerOptions): ServerSettings {
  const o = { ...DEFAULTS, ...options };
  const rateLimit: RateLimitOptions = { ...DEFAULT_RATE_LIMIT, ...options.rateLimit };
  checkPositive('port', o.port, 0);
  checkPositive('heartbeatMs', o.heartbeatMs, 10);
  checkPositive('missedHeartbeats', o.missedHeartbeats);
  checkPositive('maxFrameBytes', o.maxFrameBytes, 1024);
  checkPositive('joinTimeoutMs', o.joinTimeoutMs, 10);
  const limits: AdmissionLimits = { ...DEFAULT_ADMISSION_LIMITS, ...options.limits };
  checkPositive('limits.maxSocketsPerAddress', limits.maxSocketsPerAddress);
  checkPositive('limits.maxHandshakesPerAddress', limits.maxHandshakesPerAddress);
  checkPositive('limits.maxHandshakes', limits.maxHandshakes);
  checkPositive('limits.badTokenBurst', limits.badTokenBurst);
  checkPositive('limits.badTokenRefillMs', limits.badTokenRefillMs);
  checkPositive('limits.maxPeersPerAddress', limits.maxPeersPerAddress, 0);
  checkPositive('limits.maxCandidates', limits.maxCandidates);
  checkPositive('limits.maxCandidatesPerAddress', limits.maxCandidatesPerAddress);
  checkPositive('rateLimit.capacity', rateLimit.capacity);
  checkPositive('rateLimit.refillPerS', rateLimit.refillPerS, 0);
  const staticDir = options.staticDir === undefined ? DEFAULT_STATIC_DIR : options.staticDir;
  const log = options.log ?? (() => {});
  const ice: IceOptions = options.ice ?? {};
  checkIceOptions(ice);
  const files = new Map(
    (options.files ?? []).map((bytes) => [createHash('sha256').update(bytes).digest('hex'), bytes]),
  );
  return { ...o, rateLimit, limits, staticDir, log, ice, files };
}
