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
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { WS_PATH, type JobSpec, type PublicJobInfo } from '../src/signaling/protocol.ts';
import { Admission, RefusalReason, addressKey } from './admission.ts';
import { Connection } from './connection.ts';
import { DEFAULT_TURN_TTL_S, iceForPeer } from './ice.ts';
import { addJobTo } from './job-registry.ts';
import type { Job } from './jobs.ts';
import { ServerMetrics } from './metrics.ts';
import { resolveOptions, type ServerOptions } from './options.ts';
import { serveStatic } from './static.ts';

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

/** How long a socket may take to send its request headers (a silent one holds a socket until then). */
const HEADERS_TIMEOUT_MS = 10_000;

/** The token an HTTP request bears (`Authorization: Bearer <token>`), if any. */
function bearerToken(req: IncomingMessage): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

/** The request's path, or null when its target is not a parseable URL. */
function pathOf(req: IncomingMessage): string | null {
  try {
    return new URL(req.url ?? '/', 'http://localhost').pathname;
  } catch {
    return null;
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const o = resolveOptions(options);
  const { rateLimit, limits, staticDir, log, ice } = o;

  const jobs = new Map<string, Job>();
  const addJob = (spec: JobSpec): void => addJobTo(jobs, spec, ice, limits.maxPeersPerAddress);
  for (const spec of options.jobs ?? []) addJob(spec);

  const connections = new Set<Connection>();
  const admission = new Admission(limits);
  const metrics = new ServerMetrics(() => jobs.values(), () => connections.size, () => admission.openHandshakes);
  const ctx = {
    admission,
    job: (id: string) => jobs.get(id),
    metrics,
    rateLimit,
    heartbeatMs: o.heartbeatMs,
    missedHeartbeats: o.missedHeartbeats,
    joinTimeoutMs: o.joinTimeoutMs,
    maxBufferedBytes: o.maxBufferedBytes,
    iceFor: (job: Job, peerId: string) => iceForPeer(job.ice ?? ice, ice, peerId, Date.now()),
    log,
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: o.maxFrameBytes, perMessageDeflate: false });
  wss.on('connection', (ws, req: IncomingMessage) => {
    const key = addressKey(req.socket.remoteAddress);
    const conn = new Connection(ws, ctx, `${req.socket.remoteAddress}:${req.socket.remotePort}`, key);
    connections.add(conn);
    metrics.connectionsTotal.inc();
    ws.on('close', () => connections.delete(conn));
    admission.handshakeStarted(conn, key);
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const pathname = pathOf(req);
    if (pathname === null) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      return void res.end('bad request target\n');
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' });
      return void res.end('method not allowed\n');
    }
    if (pathname === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-store' });
      return void res.end('ok\n');
    }
    if (pathname === '/metrics') {
      const text = await metrics.text();
      res.writeHead(200, { 'content-type': metrics.contentType });
      return void res.end(text);
    }
    if (pathname === '/api/jobs' || pathname.startsWith('/api/jobs/')) return jobsApi(req, res, pathname);
    return serveStatic(req, res, staticDir, pathname);
  };

  // A job is shown to anyone only when it opted in; otherwise only to its token's holders.
  // Wrong tokens here count against the address like wrong tokens in a join (no guessing by HTTP).
  const jobsApi = (req: IncomingMessage, res: ServerResponse, pathname: string): void => {
    const token = bearerToken(req);
    const key = addressKey(req.socket.remoteAddress);
    if (token !== undefined && !admission.mayTryToken(key)) {
      metrics.refused(RefusalReason.BadTokens);
      return json(res, 429, { error: 'too many wrong tokens from your address lately; check the token, and try again in a few seconds' });
    }
    const holds = (j: Job): boolean => token !== undefined && j.tokenMatches(token);
    if (pathname === '/api/jobs') {
      const all = [...jobs.values()];
      if (token !== undefined && !all.some(holds)) admission.badToken(key);
      return json(res, 200, all.filter((j) => j.isPublic || holds(j)).map((j) => j.info()));
    }
    let id: string;
    try {
      id = decodeURIComponent(pathname.slice('/api/jobs/'.length));
    } catch {
      return json(res, 400, { error: 'bad job id encoding' });
    }
    const job = jobs.get(id);
    if (token !== undefined && !(job && holds(job))) admission.badToken(key);
    // The same answer for a missing job and a hidden one: ids are not to be probed.
    if (!job || !(job.isPublic || holds(job))) {
      return json(res, 404, { error: `no job '${id}' that this request may see; a job that is not public needs its token (Authorization: Bearer <token>)` });
    }
    return json(res, 200, job.info());
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((err: unknown) => {
      log(`http ${req.url}: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error\n');
    });
  };
  const httpOptions = { headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 2 * HEADERS_TIMEOUT_MS, connectionsCheckingInterval: 1000 };
  let http: Server;
  try {
    http = o.tls ? createTlsServer({ ...httpOptions, cert: o.tls.cert, key: o.tls.key }, onRequest) : createServer(httpOptions, onRequest);
  } catch (err) {
    // node:tls names the problem (a key that does not match the certificate, a PEM it cannot parse).
    throw new RingtrainError(ErrorCode.InvalidArgument, `cannot serve TLS with this certificate and key: ${(err as Error).message}; give the PEM certificate and its own private key`, undefined, { cause: err });
  }
  // Counted from the TCP accept (before TLS), so sockets that never send a request count too.
  http.on('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress);
    if (!admission.socketOpened(key)) {
      metrics.refused(RefusalReason.AddressSockets);
      return void socket.destroy();
    }
    socket.once('close', () => admission.socketClosed(key));
  });
  http.on('clientError', (_err, socket) => socket.destroy());
  if (o.tls) http.on('tlsClientError', (_err: Error, socket: Duplex) => socket.destroy());
  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const pathname = pathOf(req);
    const refuse = (status: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    if (pathname !== WS_PATH) return refuse('404 Not Found');
    // Too many handshakes from one address: refuse it. Too many from everyone: the
    // oldest is evicted when this one is counted (see admission.ts).
    if (!admission.mayUpgrade(addressKey(req.socket.remoteAddress))) {
      metrics.refused(RefusalReason.AddressHandshakes);
      return refuse('429 Too Many Requests');
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });

  let lastBeat = performance.now();
  const beat = setInterval(() => {
    const t = performance.now();
    // A tick that comes late means this process was stalled (GC, a busy CPU), not its
    // peers: their answers are still queued, so judge nobody this round.
    const judge = t - lastBeat < o.heartbeatMs * 2;
    lastBeat = t;
    for (const c of connections) c.heartbeat(t, judge);
  }, o.heartbeatMs);
  beat.unref();

  await new Promise<void>((resolve, reject) => {
    http.once('error', (err: NodeJS.ErrnoException) =>
      reject(new RingtrainError(ErrorCode.InvalidArgument, `cannot listen on ${o.host}:${o.port}: ${err.code ?? err.message}; pick another --port`, undefined, { cause: err })),
    );
    http.listen(o.port, o.host, () => resolve());
  });
  http.on('error', (err) => log(`http server error: ${err.message}`));
  const port = (http.address() as AddressInfo).port;
  const hostInUrl = o.host.includes(':') ? `[${o.host}]` : o.host === '0.0.0.0' ? '127.0.0.1' : o.host;
  const [httpScheme, wsScheme] = o.tls ? ['https', 'wss'] : ['http', 'ws'];
  log(`ringtrain signaling server on ${httpScheme}://${hostInUrl}:${port} (jobs: ${[...jobs.keys()].join(', ') || 'none'})`);
  // URLs only: the secret and the credentials minted from it are never logged.
  if (ice.stun?.length || ice.turn?.length) {
    log(`ICE for peers: ${[...(ice.stun ?? []), ...(ice.turn ?? [])].join(' ')}${ice.turn?.length ? ` (TURN credentials per peer, valid ${ice.credentialTtlS ?? DEFAULT_TURN_TTL_S} s)` : ''}${ice.transportPolicy === 'relay' ? ', relay only' : ''}`);
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
