/**
 * Page tests: build the real page (demo/, with its vite.config.ts; once for
 * every test file, test/support/built-page.ts) and serve it with the real signaling server, which also
 * answers /api/jobs — the way `ringtrain server` serves it. Chromium comes
 * from test/support/chromium.ts; run inside the network namespace (npm test does).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../server/index.ts';
import { builtPage } from '../support/built-page.ts';
import { gotoSteady, launchChromium, type LaunchedChromium } from '../support/chromium.ts';

export const RESULTS_DIR = fileURLToPath(new URL('../../test-results/page', import.meta.url));

/** The built page's folder, shared with other test files (test/support/built-page.ts): serve it, never write into it. */
export async function buildPage(): Promise<{ dir: string; dispose(): void }> {
  return { dir: await builtPage(), dispose: () => {} };
}

export async function servePage(staticDir: string, options: ServerOptions = {}): Promise<RunningServer> {
  return startServer({ host: '127.0.0.1', port: 0, ...options, staticDir });
}

export interface PageFixture {
  readonly server: RunningServer;
  readonly browser: LaunchedChromium;
}

/**
 * One page-test file's setting: the page built, served by a real server with
 * `options` (its jobs), and one Chromium; all gone after the file's tests.
 */
export function usePageFixture(options: ServerOptions, chromium: { extraArgs?: string[] } = {}): PageFixture {
  let built: { dir: string; dispose(): void } | undefined;
  let server: RunningServer | undefined;
  let browser: LaunchedChromium | undefined;
  beforeAll(async () => {
    built = await buildPage();
    server = await servePage(built.dir, options);
    browser = await launchChromium(chromium);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    built?.dispose();
  });
  const ready = <T>(x: T | undefined, what: string): T => {
    if (!x) throw new Error(`the page fixture's ${what} is not up: use it inside a test, after beforeAll`);
    return x;
  };
  return {
    get server() {
      return ready(server, 'server');
    },
    get browser() {
      return ready(browser, 'Chromium');
    },
  };
}

/**
 * Each tab's failed requests with Chromium's net error (`net::ERR_CONNECTION_CLOSED`): kept apart from
 * `errors`, since a reload or a closed tab aborts requests on purpose; `pageSays` prints them.
 */
const failedRequests = new WeakMap<Page, string[]>();

/** A new tab whose own console errors and page errors are collected (a test can assert there were none). */
export async function openTab(
  browser: LaunchedChromium,
  url: string,
  viewport = { width: 1280, height: 900 },
): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage();
  await page.setViewportSize(viewport);
  const failed: string[] = [];
  failedRequests.set(page, failed);
  page.on('requestfailed', (r) =>
    failed.push(`${r.method()} ${new URL(r.url()).pathname}: ${r.failure()?.errorText ?? 'no error text'}`),
  );
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  await gotoSteady(page, url);
  return { page, errors };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** For a failed wait: what the tab's Join panel and status line said, and the errors it logged. */
export async function pageSays(page: Page, errors: string[]): Promise<string> {
  const text = await page
    .evaluate(() =>
      ['participate', 'join-note', 'own-steps', 'step', 'ring']
        .map(
          (id) =>
            `${id}: ${document.querySelector(`[data-testid=${id}]`)?.textContent?.replace(/\s+/g, ' ').slice(0, 400) ?? '(none)'}`,
        )
        .join(' | '),
    )
    .catch((e: Error) => `(page unreadable: ${e.message})`);
  return `${text}; errors: ${JSON.stringify(errors.slice(-5))}; failed requests: ${JSON.stringify((failedRequests.get(page) ?? []).slice(-10))}`;
}

/**
 * Waits for the tab's Join panel to end, finished or failed, and returns its note. A tab that could not
 * join says so at once, so a failure is reported then, with what the tab said and the requests that
 * failed, instead of after the whole timeout.
 */
export async function waitForTrainingEnd(page: Page, errors: string[], timeout: number): Promise<string> {
  await page
    .waitForSelector('[data-testid=participate]:is([data-state=finished], [data-state=error])', { timeout })
    .catch(async (err: Error) => {
      throw new Error(`${err.message}; the tab says ${await pageSays(page, errors)}`);
    });
  const state = await page.getAttribute('[data-testid=participate]', 'data-state');
  if (state !== 'finished')
    throw new Error(`the tab's training ended in state '${state}'; the tab says ${await pageSays(page, errors)}`);
  return (await page.textContent('[data-testid=join-note]')) ?? '';
}

/**
 * Opens a job's link in a new tab, waits for its WebGPU adapter, clicks Join and waits for the
 * training to end; answers the tab, its errors and the Join panel's note.
 */
export async function joinAndTrain(
  browser: LaunchedChromium,
  link: string,
  timeout = 500_000,
): Promise<{ page: Page; errors: string[]; note: string }> {
  const { page, errors } = await openTab(browser, link);
  await page.waitForSelector('[data-testid=adapter][data-state=ready]', { timeout: 60_000 });
  await page.waitForSelector('[data-testid=join]:not([disabled])');
  await page.click('[data-testid=join]');
  return { page, errors, note: await waitForTrainingEnd(page, errors, timeout) };
}
