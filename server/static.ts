/**
 * Serves the built page from one folder, and nothing outside it: the URL path
 * is decoded, normalised and resolved under the root, and anything that lands
 * outside (`..`, encoded `%2e%2e`, backslashes, NUL bytes) is refused with 403.
 */
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, resolve, sep } from 'node:path';
import { PAGE_MISSING_HINT } from '../src/core/package-root.node.ts';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.wgsl': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

function reply(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  res.end(text + '\n');
}

/** Where `urlPath` lies under `root`, or null when it would escape it. Exported for tests. */
export function resolveUnder(root: string, urlPath: string): string | null {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return null;
  const rootAbs = resolve(root);
  const full = resolve(rootAbs, '.' + (decoded.startsWith('/') ? decoded : '/' + decoded));
  if (full !== rootAbs && !full.startsWith(rootAbs + sep)) return null;
  return full;
}

export async function serveStatic(
  req: IncomingMessage,
  res: ServerResponse,
  root: string | null,
  pathname: string,
): Promise<void> {
  if (!root) return reply(res, 404, 'not found');
  let file = resolveUnder(root, pathname);
  if (!file) return reply(res, 403, 'forbidden: path leaves the page folder');
  let info = await stat(file).catch(() => null);
  if (info?.isDirectory()) {
    file = resolve(file, 'index.html');
    info = await stat(file).catch(() => null);
  }
  if (!info?.isFile()) {
    const rootInfo = await stat(root).catch(() => null);
    if (!rootInfo)
      return reply(res, 404, `not found (the page is not built: ${PAGE_MISSING_HINT}; expected in ${root})`);
    return reply(res, 404, 'not found');
  }
  // A symlink inside the folder must not lead outside it either.
  const real = await realpath(file);
  const realRoot = await realpath(root);
  if (real !== realRoot && !real.startsWith(realRoot + sep))
    return reply(res, 403, 'forbidden: path leaves the page folder');
  res.writeHead(200, {
    'content-type': CONTENT_TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
    'content-length': String(info.size),
    'x-content-type-options': 'nosniff',
  });
  if (req.method === 'HEAD') return void res.end();
  createReadStream(real)
    .on('error', () => res.destroy())
    .pipe(res);
}
