/**
 * Page tests: build the page with Vite into a temporary folder, serve it with
 * the real signaling server (which also answers /api/jobs), and drive it in
 * Debian's headless Chromium with playwright-core. Run inside the network
 * namespace (npm test does).
 */
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'vite';
import { startServer, type RunningServer, type ServerOptions } from '../../server/index.ts';

const HARNESS = fileURLToPath(new URL('./harness', import.meta.url));
export const RESULTS_DIR = fileURLToPath(new URL('../../test-results/page', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';

/** Flags from shared/ENVIRONMENT.md: SwiftShader WebGPU plus WebRTC on the namespace's test address. */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  '--allow-loopback-in-peer-connection',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export async function buildPage(): Promise<{ dir: string; dispose(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'ringtrain-page-'));
  await build({ root: HARNESS, configFile: false, logLevel: 'error', build: { outDir: dir, emptyOutDir: true } });
  return { dir, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function servePage(staticDir: string, options: ServerOptions = {}): Promise<RunningServer> {
  return startServer({ host: '127.0.0.1', port: 0, ...options, staticDir });
}

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`page tests need Debian's chromium at ${CHROMIUM}: apt-get install -y chromium`);
  if (process.env.RINGTRAIN_NETNS !== '1') throw new Error('page tests open WebRTC and must run inside the network namespace: sh scripts/in-netns.sh npx vitest run test/page');
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/** A new tab whose console errors and page errors are collected (a test can assert there were none). */
export async function openTab(browser: Browser, url: string, viewport = { width: 1280, height: 900 }): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // The favicon 404 is the browser's, not the page's.
    if (m.type() === 'error' && !m.text().includes('404')) errors.push(`console: ${m.text()}`);
  });
  await page.goto(url);
  return { page, errors };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
