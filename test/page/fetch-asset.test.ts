/**
 * The page's data downloads against a real HTTP server that cuts connections: a cut before the
 * answer or in the middle of the body is tried again; an HTTP error is not; the last failure names
 * the file and what to do. (Node's fetch fails a cut connection with a TypeError, as the browser's does.)
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { fetchAssetText } from '../../demo/fetch-asset.ts';
import { ErrorCode, isRingtrainError } from '../../src/core/errors.ts';

const BODY = 'x'.repeat(200_000);
let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A server whose n-th request (1-based) gets `answer(n, req, res)`; returns its URL and the request count. */
async function serve(
  answer: (n: number, req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; requests: () => number }> {
  let n = 0;
  const server = createServer((req, res) => answer(++n, req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  close = () => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/digits/3.json`, requests: () => n };
}

const OPTIONS = { firstWaitMs: 1 };

describe('fetchAssetText', () => {
  it('tries again when the connection is cut before the answer', async () => {
    const s = await serve((n, req, res) => (n === 1 ? req.socket.destroy() : res.end(BODY)));
    expect(await fetchAssetText(s.url, 'mnist: digit file 3', OPTIONS)).toBe(BODY);
    expect(s.requests()).toBe(2);
  });

  it('tries again when the connection is cut in the middle of the body', async () => {
    const s = await serve((n, req, res) => {
      if (n > 2) return void res.end(BODY);
      res.writeHead(200, { 'content-length': String(BODY.length) });
      res.write(BODY.slice(0, 1000), () => req.socket.destroy());
    });
    expect(await fetchAssetText(s.url, 'mnist: digit file 3', OPTIONS)).toBe(BODY);
    expect(s.requests()).toBe(3);
  });

  it('gives up after its tries, naming the file, the URL, the last failure and what to do', async () => {
    const s = await serve((_n, req) => req.socket.destroy());
    const err = await fetchAssetText(s.url, 'mnist: digit file 3', OPTIONS).catch((e: unknown) => e);
    expect(isRingtrainError(err, ErrorCode.BadData)).toBe(true);
    expect((err as Error).message).toMatch(
      /^mnist: digit file 3: downloading http:\/\/127\.0\.0\.1:\d+\/digits\/3\.json failed 3 times \(last: fetch failed\); check this tab's connection/,
    );
    expect(s.requests()).toBe(3);
  });

  it('does not retry an HTTP error: a 404 says to rebuild the page', async () => {
    const s = await serve((_n, _req, res) => {
      res.writeHead(404, 'Not Found');
      res.end('not found\n');
    });
    const err = await fetchAssetText(s.url, 'cmudict: the dictionary', OPTIONS).catch((e: unknown) => e);
    expect(isRingtrainError(err, ErrorCode.BadData)).toBe(true);
    expect((err as Error).message).toMatch(
      /^cmudict: the dictionary: the server answered 404 Not Found for .*; rebuild the page \(npm run build:page\)\.$/,
    );
    expect(s.requests()).toBe(1);
  });
});
