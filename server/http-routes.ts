/**
 * The plain HTTP side of the server: /healthz, /metrics, the jobs API, and
 * the built page for anything else. WebSocket upgrades never come here
 * (see ./upgrade.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RefusalReason, addressKey, type Admission } from './admission.ts';
import type { Job } from './jobs.ts';
import type { ServerMetrics } from './metrics.ts';
import { serveStatic } from './static.ts';

export interface HttpRoutesContext {
  jobs: ReadonlyMap<string, Job>;
  admission: Admission;
  metrics: ServerMetrics;
  /** Folder of the built page; null serves no files. */
  staticDir: string | null;
  /** Jobs' data files by hex SHA-256 (ServerOptions.files). */
  files: ReadonlyMap<string, Uint8Array>;
  log(line: string): void;
}

/** The token an HTTP request bears (`Authorization: Bearer <token>`), if any. */
function bearerToken(req: IncomingMessage): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

/** The request's path, or null when its target is not a parseable URL. */
export function pathOf(req: IncomingMessage): string | null {
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

/** The 'request' listener: routes each request, and answers 500 (logging why) when a route throws. */
export function httpRequestHandler(ctx: HttpRoutesContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    route(ctx, req, res).catch((err: unknown) => {
      ctx.log(`http ${req.url}: ${String(err)}`);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error\n');
    });
  };
}

async function route(ctx: HttpRoutesContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
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
    const text = await ctx.metrics.text();
    res.writeHead(200, { 'content-type': ctx.metrics.contentType });
    return void res.end(text);
  }
  if (pathname === '/api/jobs' || pathname.startsWith('/api/jobs/')) return jobsApi(ctx, req, res, pathname);
  return serveStatic(req, res, ctx.staticDir, pathname);
}

// A job is shown to anyone only when it opted in; otherwise only to its token's holders.
// Wrong tokens here count against the address like wrong tokens in a join (no guessing by HTTP).
function jobsApi(
  { jobs, admission, metrics, files }: HttpRoutesContext,
  req: IncomingMessage,
  res: ServerResponse,
  pathname: string,
): void {
  const token = bearerToken(req);
  const key = addressKey(req.socket.remoteAddress);
  if (token !== undefined && !admission.mayTryToken(key)) {
    metrics.refused(RefusalReason.BadTokens);
    return json(res, 429, {
      error: 'too many wrong tokens from your address lately; check the token, and try again in a few seconds',
    });
  }
  const holds = (j: Job): boolean => token !== undefined && j.tokenMatches(token);
  if (pathname === '/api/jobs') {
    const all = [...jobs.values()];
    if (token !== undefined && !all.some(holds)) admission.badToken(key);
    return json(
      res,
      200,
      all.filter((j) => j.isPublic || holds(j)).map((j) => j.info()),
    );
  }
  const fileRoute = /^\/api\/jobs\/([^/]+)\/files\/([^/]+)$/.exec(pathname);
  let id: string;
  try {
    id = decodeURIComponent(fileRoute ? fileRoute[1] : pathname.slice('/api/jobs/'.length));
  } catch {
    return json(res, 400, { error: 'bad job id encoding' });
  }
  const job = jobs.get(id);
  if (token !== undefined && !(job && holds(job))) admission.badToken(key);
  // The same answer for a missing job and a hidden one: ids are not to be probed.
  if (!job || !(job.isPublic || holds(job))) {
    return json(res, 404, {
      error: `no job '${id}' that this request may see; a job that is not public needs its token (Authorization: Bearer <token>)`,
    });
  }
  if (fileRoute) return jobFile(res, job, holds(job), fileRoute[2], files);
  return json(res, 200, job.info());
}

/**
 * One of a job's data files (its text, its table), for a tab that joins it: a
 * tab has no disk to read the job's file from, and the server that serves the
 * page is the one place both the job and the tab trust. Only a peer may have
 * it (the token; a public job is public to watch, its data is not), and only
 * a file the job's settings name by hash, so a server given several files
 * never hands one job another's.
 */
function jobFile(
  res: ServerResponse,
  job: Job,
  holdsToken: boolean,
  sha256: string,
  files: ReadonlyMap<string, Uint8Array>,
): void {
  if (!holdsToken)
    return json(res, 403, {
      error: `the files of job '${job.id}' go to its peers only: send its token (Authorization: Bearer <token>)`,
    });
  const s = job.settings.data;
  const named = [s.textSha256, s.tableSha256, s.labelsSha256].filter((h): h is string => h !== undefined && h !== '');
  if (!named.includes(sha256))
    return json(res, 404, {
      error: `job '${job.id}' names no file with SHA-256 ${sha256}; it names ${named.length ? named.join(', ') : 'none'}`,
    });
  const bytes = files.get(sha256);
  if (!bytes) {
    return json(res, 404, {
      error: `this server was not given the file with SHA-256 ${sha256} that job '${job.id}' trains on; start it with the file (ringtrain run --text FILE or --data FILE, with --serve-page; or ringtrain server --job ID --text FILE or --data FILE)`,
    });
  }
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-length': String(bytes.length),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(bytes);
}
