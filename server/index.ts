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
 *
 * startServer wires the parts together: options.ts (defaults and checks),
 * job-registry.ts, http-routes.ts, http-server.ts, upgrade.ts, heartbeat.ts, shutdown.ts.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WS_PATH, type JobSpec, type PublicJobInfo } from '../src/signaling/protocol.ts';
import { Admission } from './admission.ts';
import type { Connection } from './connection.ts';
import { startHeartbeat } from './heartbeat.ts';
import { httpRequestHandler } from './http-routes.ts';
import { createHttpServer, listen } from './http-server.ts';
import { DEFAULT_TURN_TTL_S, type IceOptions } from './ice.ts';
import { addJobTo } from './job-registry.ts';
import type { Job } from './jobs.ts';
import { ServerMetrics } from './metrics.ts';
import { resolveOptions, type ServerOptions, type ServerSettings } from './options.ts';
import { shutDown } from './shutdown.ts';
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

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const s = resolveOptions(options);
  const jobs = new Map<string, Job>();
  const addJob = (spec: JobSpec): void => addJobTo(jobs, spec, s.ice, s.limits, options.onMembership);
  for (const spec of options.jobs ?? []) addJob(spec);

  const connections = new Set<Connection>();
  const admission = new Admission(s.limits);
  const metrics = new ServerMetrics(
    () => jobs.values(),
    () => connections.size,
    () => admission.openHandshakes,
  );
  const onRequest = httpRequestHandler({
    jobs,
    admission,
    metrics,
    staticDir: s.staticDir,
    files: s.files,
    log: s.log,
  });
  const http = createHttpServer(s.tls, onRequest, admission, metrics);
  const wss = acceptWebSockets(http, { settings: s, jobs, admission, metrics, connections });
  const stopHeartbeat = startHeartbeat(connections, s.heartbeatMs);

  await listen(http, s.host, s.port, s.log);
  const { url, wsUrl, port } = urlsOf(http, s);
  logStarted(s.log, url, jobs, s.ice);

  let closed: Promise<void> | null = null;
  return {
    url,
    wsUrl,
    port,
    addJob,
    jobInfo: (id) => jobs.get(id)?.info(),
    metricsText: () => metrics.text(),
    close() {
      closed ??= shutDown({ stopHeartbeat, connections, wss, http });
      return closed;
    },
  };
}

/** Where clients reach the listening server (0.0.0.0 is reached as 127.0.0.1 on this machine). */
function urlsOf(http: Server, s: ServerSettings): { url: string; wsUrl: string; port: number } {
  const port = (http.address() as AddressInfo).port;
  const hostInUrl = s.host.includes(':') ? `[${s.host}]` : s.host === '0.0.0.0' ? '127.0.0.1' : s.host;
  const [httpScheme, wsScheme] = s.tls ? ['https', 'wss'] : ['http', 'ws'];
  return { url: `${httpScheme}://${hostInUrl}:${port}`, wsUrl: `${wsScheme}://${hostInUrl}:${port}${WS_PATH}`, port };
}

function logStarted(log: (line: string) => void, url: string, jobs: ReadonlyMap<string, Job>, ice: IceOptions): void {
  log(`ringtrain signaling server on ${url} (jobs: ${[...jobs.keys()].join(', ') || 'none'})`);
  // URLs only: the secret and the credentials minted from it are never logged.
  if (ice.stun?.length || ice.turn?.length) {
    log(
      `ICE for peers: ${[...(ice.stun ?? []), ...(ice.turn ?? [])].join(' ')}${ice.turn?.length ? ` (TURN credentials per peer, valid ${ice.credentialTtlS ?? DEFAULT_TURN_TTL_S} s)` : ''}${ice.transportPolicy === 'relay' ? ', relay only' : ''}`,
    );
  }
}
