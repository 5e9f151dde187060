/**
 * The signaling server: one node:http (or, with `tls`, node:https) server that answers
 *   GET /healthz          200 while serving
 *   GET /metrics          Prometheus text
 *   GET /api/jobs         the jobs this request may see: public ones, and the one
 *                         whose token it bears (Authorization: Bearer <token>)
 *   GET /api/jobs/:id     one such job (config minus token, peers, progress); 404 otherwise
 *   GET anything else     the built page (static files, no path traversal)
 * and accepts WebSocket upgrades on /ws for the signaling protocol
 * (src/signaling/protocol.ts), within the limits of ./admission.ts.
 */
import type { AddressInfo } from 'node:net';
import { WS_PATH, type JobSpec, type PublicJobInfo } from '../src/signaling/protocol.ts';
import { Admission } from './admission.ts';
import type { Connection } from './connection.ts';
import { httpRequestHandler } from './http-routes.ts';
import { createHttpServer, listen } from './http-server.ts';
import { DEFAULT_TURN_TTL_S } from './ice.ts';
import { addJobTo } from './job-registry.ts';
import type { Job } from './jobs.ts';
import { ServerMetrics } from './metrics.ts';
import { resolveOptions, type ServerOptions } from './options.ts';
import { acceptWebSockets } from './upgrade.ts';

export type { PublicJobInfo } from '../src/signaling/protocol.ts';
export type { RateLimitOptions } from './rate-limit.ts';
export type { AdmissionLimits } from './admission.ts';
export type { IceOptions } from './ice.ts';
export { DEFAULT_STATIC_DIR, type ServerOptions } from './options.ts';

export interface RunningServer {
  /** http://host:port (https:// with tls) */
  readonly url: string;
  /** ws://host:port/ws (wss:// with tls) */
  readonly wsUrl: string;
  readonly port: number;
  addJob(spec: JobSpec): void;
  jobInfo(id: string): PublicJobInfo | undefined;
  /** Prometheus text, as GET /metrics serves it. */
  metricsText(): Promise<string>;
  /** Closes every connection (peers are told) and the listener. */
  close(): Promise<void>;
}

/** How long close() waits for clients to answer the close handshake before cutting them off. */
const CLOSE_GRACE_MS = 1000;

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const s = resolveOptions(options);
  const jobs = new Map<string, Job>();
  const addJob = (spec: JobSpec): void => addJobTo(jobs, spec, s.ice, s.limits.maxPeersPerAddress);
  for (const spec of options.jobs ?? []) addJob(spec);

  const connections = new Set<Connection>();
  const admission = new Admission(s.limits);
  const metrics = new ServerMetrics(() => jobs.values(), () => connections.size, () => admission.openHandshakes);
  const onRequest = httpRequestHandler({ jobs, admission, metrics, staticDir: s.staticDir, log: s.log });
  const http = createHttpServer(s.tls, onRequest, admission, metrics);
  const wss = acceptWebSockets(http, { settings: s, jobs, admission, metrics, connections });

  let lastBeat = performance.now();
  const beat = setInterval(() => {
    const t = performance.now();
    // A tick that comes late means this process was stalled (GC, a busy CPU), not its
    // peers: their answers are still queued, so judge nobody this round.
    const judge = t - lastBeat < s.heartbeatMs * 2;
    lastBeat = t;
    for (const c of connections) c.heartbeat(t, judge);
  }, s.heartbeatMs);
  beat.unref();

  await listen(http, s.host, s.port, s.log);
  const port = (http.address() as AddressInfo).port;
  const hostInUrl = s.host.includes(':') ? `[${s.host}]` : s.host === '0.0.0.0' ? '127.0.0.1' : s.host;
  const [httpScheme, wsScheme] = s.tls ? ['https', 'wss'] : ['http', 'ws'];
  const ice = s.ice;
  s.log(`ringtrain signaling server on ${httpScheme}://${hostInUrl}:${port} (jobs: ${[...jobs.keys()].join(', ') || 'none'})`);
  // URLs only: the secret and the credentials minted from it are never logged.
  if (ice.stun?.length || ice.turn?.length) {
    s.log(`ICE for peers: ${[...(ice.stun ?? []), ...(ice.turn ?? [])].join(' ')}${ice.turn?.length ? ` (TURN credentials per peer, valid ${ice.credentialTtlS ?? DEFAULT_TURN_TTL_S} s)` : ''}${ice.transportPolicy === 'relay' ? ', relay only' : ''}`);
  }

  let closed: Promise<void> | null = null;
  return {
    url: `${httpScheme}://${hostInUrl}:${port}`,
    wsUrl: `${wsScheme}://${hostInUrl}:${port}${WS_PATH}`,
    port,
    addJob,
    jobInfo: (id) => jobs.get(id)?.info(),
    metricsText: () => metrics.text(),
    close() {
      closed ??= (async () => {
        clearInterval(beat);
        for (const c of connections) c.shutdown();
        // A client that never answers the close handshake must not hold us up.
        const force = setTimeout(() => {
          for (const c of connections) c.terminate();
        }, CLOSE_GRACE_MS);
        await new Promise<void>((resolve) => wss.close(() => resolve()));
        clearTimeout(force);
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      })();
      return closed;
    },
  };
}
