import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { connect } from '../../src/signaling/client.node.ts';
import { jobSpec } from '../server/helpers.ts';
import { gotoSteady } from '../support/chromium.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';

/**
 * The client as the page gets it: bundled by Vite, served by the signaling
 * server itself, run in real Chromium with the browser's own WebSocket.
 */
describe('signaling client in Chromium (the browser WebSocket)', () => {
  let dir: string;
  let server: RunningServer;
  let browser: Browser;
  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium is missing at ${CHROMIUM}: apt-get install -y chromium`);
    dir = mkdtempSync(join(tmpdir(), 'ringtrain-browser-client-'));
    await build({
      configFile: false,
      logLevel: 'silent',
      root,
      build: {
        lib: { entry: `${root}src/signaling/client.ts`, formats: ['es'], fileName: 'client' },
        outDir: dir,
        emptyOutDir: true,
        minify: false,
      },
    });
    // The module puts the client on window; evaluate() bodies must not contain import() (vitest rewrites it).
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><title>client test</title><script type="module">import * as c from "./client.js"; window.signaling = c;</script>',
    );
    server = await startServer({ staticDir: dir, jobs: [jobSpec('web', 'tw', 2, 2)] });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a browser peer joins next to a Node peer and they exchange signals; a wrong token is a Signaling error', async () => {
    const page = await browser.newPage();
    await gotoSteady(page, `${server.url}/`);
    await page.waitForFunction(() => 'signaling' in window);
    const refused = await page.evaluate(async () => {
      const { connect } = (window as unknown as { signaling: typeof import('../../src/signaling/client.ts') })
        .signaling;
      try {
        await connect(location.origin, { job: 'web', token: 'wrong' });
        return null;
      } catch (e) {
        return { code: (e as { code: string }).code, detail: (e as { detail: unknown }).detail };
      }
    });
    expect(refused).toEqual({ code: 'ERR_SIGNALING', detail: { code: 'bad-token', fatal: true } });

    const node = await connect(server.url, { job: 'web', token: 'tw', name: 'node' });
    try {
      const reply = new Promise<[number, unknown]>((resolve) => {
        node.on('membership', (m) => {
          if (!m.ready) return;
          const s = node.signaler(m.epoch);
          s.onSignal((from, data) => resolve([from, data]));
          s.send(1, { offer: 'from node' });
        });
      });
      const seen = await page.evaluate(async () => {
        const { connect } = (window as unknown as { signaling: typeof import('../../src/signaling/client.ts') })
          .signaling;
        const client = await connect(location.origin, { job: 'web', token: 'tw', name: 'tab' });
        const m = await client.waitForReady(30_000);
        const signaler = client.signaler(m.epoch);
        const first = await new Promise<{ from: number; data: unknown }>((resolve) =>
          signaler.onSignal((from, data) => resolve({ from, data })),
        );
        signaler.send(first.from, { answer: 'from the tab' });
        return { rank: client.rank, size: m.size, runtime: m.peers[1].runtime, first };
      });
      expect(seen).toEqual({ rank: 1, size: 2, runtime: 'browser', first: { from: 0, data: { offer: 'from node' } } });
      expect(await reply).toEqual([1, { answer: 'from the tab' }]);
      // Closing the tab closes its socket: the Node peer is told.
      const left = new Promise((resolve) => node.on('peer-left', resolve));
      await page.close();
      expect(await left).toMatchObject({ rank: 1, name: 'tab', reason: 'disconnected' });
    } finally {
      await node.leave();
    }
  });
});
