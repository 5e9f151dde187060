/**
 * The same src/comm and src/collectives code in Chromium: three ranks in one
 * page over native WebRTC, built with Vite as the page is. Inside the private
 * network namespace only (npm test provides it).
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { afterAll, describe, expect, it } from 'vitest';
import { gotoSteady, launchChromium, type LaunchedChromium } from '../support/chromium.ts';

let out = '';
let server: Server | null = null;
let browser: LaunchedChromium | null = null;
afterAll(async () => {
  await browser?.close();
  server?.close();
  if (out) rmSync(out, { recursive: true, force: true });
});

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript' };

describe('collectives over WebRTC in Chromium', () => {
  it('allreduce (fragmented, fp16), allgather and broadcast agree across three ranks', async () => {
    out = mkdtempSync(join(tmpdir(), 'ringtrain-browser-ring-'));
    await build({
      configFile: false,
      logLevel: 'error',
      root: fileURLToPath(new URL('./browser', import.meta.url)),
      base: './',
      build: { outDir: out, emptyOutDir: true, target: 'es2022' },
    });
    server = createServer((req, res) => {
      const path = normalize(join(out, req.url === '/' ? 'index.html' : decodeURIComponent(req.url!.split('?')[0])));
      try {
        if (!path.startsWith(out)) throw new Error('outside');
        const body = readFileSync(path);
        res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' });
        res.end(body);
      } catch {
        res.writeHead(404);
        res.end();
      }
    }).listen(0, '127.0.0.1');
    await new Promise((r) => server!.once('listening', r));
    const port = (server.address() as { port: number }).port;
    browser = await launchChromium();
    const page = await browser.newPage();
    await gotoSteady(page, `http://127.0.0.1:${port}/`);
    const raw = await page.evaluate(() => (window as unknown as { ringResult: Promise<string> }).ringResult);
    const results = JSON.parse(raw);
    expect(results.error, browser.errors.join('\n')).toBeUndefined();
    for (const r of results) {
      expect(r.first).toBe(6);
      expect(r.last).toBe(6);
      expect(r.half500).toBeCloseTo(0.5 + 1, 2); // mean of i/1000 + r over r = 0, 1, 2
      expect(r.gathered).toEqual([0, 1, 1, 2, 2, 2]);
      expect(r.root).toEqual([20, 21]);
    }
  });
});
