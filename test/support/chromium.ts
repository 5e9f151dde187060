/**
 * Headless Chromium for tests: Debian's /usr/bin/chromium driven by
 * playwright-core (which never downloads a browser), with WebGPU on
 * SwiftShader and WebRTC allowed on the test namespace's veth address.
 * See /work/shared/ENVIRONMENT.md for why each flag is there.
 *
 * Browser tests must run inside scripts/in-netns.sh (npm test does): Chromium
 * gathers WebRTC candidates on every interface, and tests may not send
 * traffic outside a private namespace. Outside one, launching fails.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.RINGTRAIN_CHROMIUM ?? '/usr/bin/chromium';

export const WEBGPU_FLAGS = [
  '--enable-unsafe-webgpu',
  '--enable-features=Vulkan',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
];
export const WEBRTC_FLAGS = ['--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'];
export const QUIET_FLAGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-default-apps',
];

export interface LaunchedChromium {
  context: BrowserContext;
  /** A new tab that forwards its console errors and uncaught exceptions to `errors`. */
  newPage(): Promise<Page>;
  /** Console errors and page exceptions seen so far, for failure messages. */
  errors: string[];
  close(): Promise<void>;
}

/** Why Chromium cannot run here, or null when it can. */
export function chromiumUnavailable(): string | null {
  if (!existsSync(CHROMIUM_PATH))
    return `${CHROMIUM_PATH} not found: apt-get install -y chromium (or set RINGTRAIN_CHROMIUM)`;
  if (process.env.RINGTRAIN_NETNS !== '1')
    return 'browser tests must run in a private network namespace: run them through `npm test` or `sh scripts/in-netns.sh npx vitest run …`';
  return null;
}

/** Launches Chromium with a fresh profile; throws with the reason when it cannot run here. */
export async function launchChromium(opts: { extraArgs?: string[] } = {}): Promise<LaunchedChromium> {
  const why = chromiumUnavailable();
  if (why) throw new Error(why);
  const profile = mkdtempSync(join(tmpdir(), 'ringtrain-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [...QUIET_FLAGS, ...WEBGPU_FLAGS, ...WEBRTC_FLAGS, ...(opts.extraArgs ?? [])],
    viewport: { width: 1280, height: 900 },
  });
  const errors: string[] = [];
  return {
    context,
    errors,
    async newPage() {
      const page = await context.newPage();
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(`console: ${m.text()}`);
      });
      page.on('pageerror', (e) => errors.push(`page: ${e.message}`));
      return page;
    },
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * page.goto, tried again when Chromium drops the load with ERR_NETWORK_CHANGED.
 * The TURN tests add and remove interfaces in the namespace the whole suite
 * shares, and Chromium abandons loads in flight when the interface list
 * changes: a CI run failed so. Any other error is the test's.
 */
export async function gotoSteady(page: Page, url: string, attempts = 3): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.goto(url);
      return;
    } catch (e) {
      if (attempt >= attempts || !String((e as Error).message).includes('ERR_NETWORK_CHANGED')) throw e;
    }
  }
}
