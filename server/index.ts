/**
 * The signaling server: one node:http server that answers
 *   GET /healthz          200 while serving
 *   GET /metrics          Prometheus text
 *   GET /api/jobs         public info of every job
 *   GET /api/jobs/:id     public info of one job (config minus token, peers, progress)
 *   GET anything else     the built page (static files, no path traversal)
 * and accepts WebSocket upgrades on /ws for the signaling protocol
 * (src/signaling/protocol.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { WebSocketServer } from 'ws';
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { DEFAULT_MAX_FRAME_BYTES, WS_PATH, describeIssues, jobSpecSchema, type JobSpec, type PublicJobInfo } from '../src/signaling/protocol.ts';
import { Connection } from './connection.ts';
import { Job } from './jobs.ts';
import { ServerMetrics } from './metrics.ts';
import { DEFAULT_RATE_LIMIT, type RateLimitOptions } from './rate-limit.ts';
import { serveStatic } from './static.ts';

export type { PublicJobInfo } from '../src/signaling/protocol.ts';
export type { RateLimitOptions } from './rate-limit.ts';

/** The built page, relative to this file (independent of the working directory). */
export const DEFAULT_STATIC_DIR = fileURLToPath(new URL('../demo/dist', import.meta.url));

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
  /** A connection that has not joined within this is closed. */
  joinTimeoutMs?: number;
  maxConnections?: number;
  /** Unsent bytes after which a peer that does not read is dropped. */
  maxBufferedBytes?: number;
  /** Where log lines go; default nowhere. */
  log?: (line: string) => void;
}

export interface RunningServer {
  /** http://host:port */
  readonly url: string;
  /** ws://host:port/ws */
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

const DEFAULTS = {
  port: 0,
  host: '127.0.0.1',
  heartbeatMs: 5000,
  missedHeartbeats: 3,
  maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
  joinTimeoutMs: 10_000,
  maxConnections: 1024,
  maxBufferedBytes: 8 * 1024 * 1024,
};

function checkPositive(name: string, v: number, min = 1): void {
  if (!Number.isFinite(v) || v < min) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `server option ${name} must be a number >= ${min}, got ${v}`);
  }
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
  const o = { ...DEFAULTS, ...options };
  const rateLimit: RateLimitOptions = { ...DEFAULT_RATE_LIMIT, ...options.rateLimit };
  checkPositive('port', o.port, 0);
  checkPositive('heartbeatMs', o.heartbeatMs, 10);
  checkPositive('missedHeartbeats', o.missedHeartbeats);
  checkPositive('maxFrameBytes', o.maxFrameBytes, 1024);
  checkPositive('joinTimeoutMs', o.joinTimeoutMs, 10);
  checkPositive('maxConnections', o.maxConnections);
  checkPositive('rateLimit.capacity', rateLimit.capacity);
  checkPositive('rateLimit.refillPerS', rateLimit.refillPerS, 0);
  const staticDir = options.staticDir === undefined ? DEFAULT_STATIC_DIR : options.staticDir;
  const log = options.log ?? (() => {});

  const jobs = new Map<string, Job>();
  const addJob = (spec: JobSpec): void => {
    const parsed = jobSpecSchema.safeParse(spec);
    if (!parsed.success) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `bad job spec: ${describeIssues(parsed.error)}`, { job: (spec as { id?: unknown })?.id });
    }
    if (jobs.has(parsed.data.id)) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `job '${parsed.data.id}' already exists; pick another id`);
    }
    jobs.set(parsed.data.id, new Job(parsed.data));
  };
  for (const spec of options.jobs ?? []) addJob(spec);

  const connections = new Set<Connection>();
  const metrics = new ServerMetrics(() => jobs.values(), () => connections.size);
  const ctx = {
    job: (id: string) => jobs.get(id),
    metrics,
    rateLimit,
    heartbeatMs: o.heartbeatMs,
    missedHeartbeats: o.missedHeartbeats,
    joinTimeoutMs: o.joinTimeoutMs,
    maxBufferedBytes: o.maxBufferedBytes,
    log,
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: o.maxFrameBytes, perMessageDeflate: false });
  wss.on('connection', (ws, req: IncomingMessage) => {
    const conn = new Connection(ws, ctx, `${req.socket.remoteAddress}:${req.socket.remotePort}`);
    connections.add(conn);
    metrics.connectionsTotal.inc();
    ws.on('close', () => connections.delete(conn));
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
    if (pathname === '/api/jobs') return json(res, 200, [...jobs.values()].map((j) => j.info()));
    if (pathname.startsWith('/api/jobs/')) {
      let id: string;
      try {
        id = decodeURIComponent(pathname.slice('/api/jobs/'.length));
      } catch {
        return json(res, 400, { error: 'bad job id encoding' });
      }
      const job = jobs.get(id);
      return job ? json(res, 200, job.info()) : json(res, 404, { error: `no job '${id}'` });
    }
    return serveStatic(req, res, staticDir, pathname);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log(`http ${req.url}: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error\n');
    });
  });
  http.on('clientError', (_err, socket) => socket.destroy());
  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const pathname = pathOf(req);
    const refuse = (status: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    if (pathname !== WS_PATH) return refuse('404 Not Found');
    if (connections.size >= o.maxConnections) {
      metrics.error('too-many-connections');
      return refuse('503 Service Unavailable');
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
  log(`ringtrain signaling server on http://${hostInUrl}:${port} (jobs: ${[...jobs.keys()].join(', ') || 'none'})`);

  let closed: Promise<void> | null = null;
  return {
    url: `http://${hostInUrl}:${port}`,
    wsUrl: `ws://${hostInUrl}:${port}${WS_PATH}`,
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
