/**
 * The page behind a NAT: real headless Chromium runs inside one peer's network
 * namespace and a Deno `ringtrain worker` inside another; the two reach the
 * relay namespace (coturn and `ringtrain server`, which serves the built page)
 * but never each other. Through the job's TURN server they form a ring and
 * train, and the page shows it; the TURN credential the page was handed shows
 * up in none of: the page's address, its console, the server's public
 * endpoints, the server's output. Without TURN the page says what is missing.
 *
 * Chromium enters its namespace through a wrapper script given to playwright
 * as the browser's executable (`nsenter -n` keeps the pipe playwright drives
 * it by), so every socket the browser opens lives in that namespace.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHROMIUM_PATH,
  QUIET_FLAGS,
  WEBGPU_FLAGS,
  WEBRTC_FLAGS,
  chromiumUnavailable,
  gotoSteady,
} from '../support/chromium.ts';
import { buildPage, pageSays } from '../page/serve-page.ts';
import { recoveryArgs, requireNetns } from '../support/workers.ts';
import {
  TURN_PORT,
  allocatedCredentials,
  coturnTrouble,
  killAll,
  start,
  startCoturn,
  startSignaling,
  stop,
  type Proc,
} from './processes.ts';
import { makeTopology, type Topology } from './topology.ts';

const SECRET = randomBytes(18).toString('base64');
const TOKEN = randomBytes(12).toString('hex');
const JOB = 'natpage';
const STEPS = 3;
const PORT = 18091;

let topo: Topology;
let dir: string;
let page: { dir: string; dispose(): void } | undefined;
let coturn: Proc;
let browser: Browser | undefined;

beforeAll(async () => {
  requireNetns();
  const why = chromiumUnavailable();
  if (why) throw new Error(why);
  dir = mkdtempSync(join(tmpdir(), 'ringtrain-turn-page-'));
  writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
  writeFileSync(join(dir, 'turn-secret'), `${SECRET}\n`);
  // Its own subnet: nat.test.ts may build its topology at the same time.
  topo = await makeTopology(2, 2);
  const wrapper = join(dir, 'chromium-in-peer1');
  writeFileSync(wrapper, `#!/bin/sh\nexec nsenter -t ${topo.peers[0].pid} -n ${CHROMIUM_PATH} "$@"\n`);
  chmodSync(wrapper, 0o755);
  [page, coturn, browser] = await Promise.all([
    buildPage(),
    startCoturn(topo.relay, topo.relayIp, SECRET, dir),
    // WebGPU needs a secure context; the relay's address is no localhost. Serving https is
    // test/page/secure.test.ts's subject: here Chromium counts this origin as secure.
    chromium.launch({
      executablePath: wrapper,
      headless: true,
      args: [
        ...QUIET_FLAGS,
        ...WEBGPU_FLAGS,
        ...WEBRTC_FLAGS,
        `--unsafely-treat-insecure-origin-as-secure=http://${topo.relayIp}:${PORT}`,
      ],
    }),
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await killAll();
  await topo?.close();
  page?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function server(port: number, extra: string[]): Promise<Proc> {
  const args = [
    '--job',
    JOB,
    '--token-file',
    join(dir, 'token'),
    '--model',
    'mlp',
    '--batch',
    '16',
    '--steps',
    String(STEPS),
    '--min-peers',
    '2',
    '--max-peers',
    '2',
    '--static',
    page!.dir,
  ];
  return startSignaling(topo.relay, topo.relayIp, port, [...args, ...extra]);
}

/** The Deno worker, in the other peer's namespace; its connect timeout outlasts the page's, so the page is the one to report a missing path. */
function worker(port: number): Proc {
  const args = [
    'run',
    '-A',
    'src/cli/main.ts',
    'worker',
    '--server',
    `http://${topo.relayIp}:${port}`,
    '--job',
    JOB,
    '--events',
    '--name',
    'deno-peer',
    '--connect-timeout-ms',
    '120000',
    ...recoveryArgs(),
  ];
  return start(topo.peers[1], 'node_modules/.bin/deno', args, { RINGTRAIN_TOKEN: TOKEN });
}

/** A tab on the job's link (token in the fragment, as the server prints it), with everything its console says. */
async function openJob(port: number): Promise<{ tab: Page; console: string[]; errors: string[] }> {
  const tab = await browser!.newPage();
  const console: string[] = [];
  const errors: string[] = [];
  tab.on('console', (m) => {
    console.push(`${m.type()}: ${m.text()}`);
    if (m.type() === 'error') errors.push(m.text());
  });
  tab.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await gotoSteady(tab, `http://${topo.relayIp}:${port}/?job=${JOB}#token=${TOKEN}`);
  await tab.waitForSelector('[data-testid=adapter][data-state]', { timeout: 60_000 });
  expect(
    await tab.getAttribute('[data-testid=adapter]', 'data-state'),
    (await tab.textContent('[data-testid=adapter]')) ?? '',
  ).toBe('ready');
  // The ring panel empties once the job ends: keep the largest ring it drew (set before any ring forms).
  await tab.evaluate(() => {
    const ring = document.querySelector<HTMLElement>('[data-testid=ring]')!;
    const w = window as unknown as { largestRing: number };
    w.largestRing = 0;
    new MutationObserver(() => (w.largestRing = Math.max(w.largestRing, Number(ring.dataset.size ?? 0)))).observe(
      ring,
      { attributes: true, attributeFilter: ['data-size'] },
    );
  });
  return { tab, console, errors };
}

/** Waits for the Join panel to reach `state`; on timeout says what the page, the worker and coturn said. */
async function reach(tab: Page, errors: string[], state: string, timeout: number, w: Proc): Promise<void> {
  await tab.waitForSelector(`[data-testid=participate][data-state=${state}]`, { timeout }).catch(async (err: Error) => {
    throw new Error(
      `${err.message}\npage: ${await pageSays(tab, errors)}\nworker: ${w.err.slice(-1500)}\ncoturn: ${coturnTrouble(coturn)}`,
    );
  });
}

async function clickJoin(tab: Page): Promise<void> {
  await tab.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 30_000 });
  await tab.click('[data-testid=join]');
}

/** Polls the job's page (with its token) until the tab is a peer: its peer id (its TURN username ends with it) and what the job showed meanwhile. */
async function tabInJob(base: string, tab: Page, errors: string[]): Promise<{ peerId: string; detail: string }> {
  let detail = '';
  for (const deadline = Date.now() + 120_000; ; await new Promise((r) => setTimeout(r, 200))) {
    if (Date.now() > deadline)
      throw new Error(`the tab never showed up in the job: ${detail}; page: ${await pageSays(tab, errors)}`);
    detail = await (await fetch(`${base}/api/jobs/${JOB}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    const peerId = (JSON.parse(detail) as { peers?: { peerId: string; runtime: string }[] }).peers?.find(
      (p) => p.runtime === 'browser',
    )?.peerId;
    if (peerId) return { peerId, detail };
  }
}

describe('a page behind a NAT', () => {
  // One tab throughout: the job's operator adds TURN after the first try fails, and the same tab
  // (its kernels compiled once: minutes on a starved software adapter) joins again and trains.
  it('without TURN says it found no path and what the server needs; with it, trains with a Deno worker behind another NAT and shows the credential nowhere', async () => {
    const port = PORT;
    const base = `http://${topo.relayIp}:${port}`;

    // No TURN. The page cannot be given --connect-timeout-ms: the job tells it how long ICE may take.
    const direct = await server(port, ['--hp', 'connectTimeoutMs=6000']);
    let w = worker(port);
    const { tab, console, errors } = await openJob(port);
    await clickJoin(tab);
    await reach(tab, errors, 'error', 240_000, w);
    const note = (await tab.textContent('[data-testid=join-note]')) ?? '';
    expect(note).toMatch(/Could not join: rank (\d) found no network path to rank (?!\1)\d/);
    expect(note).toContain('--turn turn:HOST:3478 --turn-secret-file');
    await stop(w);
    await stop(direct);

    // The same job on the same address, now with coturn.
    const relayed = await server(port, [
      '--turn',
      `turn:${topo.relayIp}:${TURN_PORT}?transport=udp`,
      '--turn-secret-file',
      join(dir, 'turn-secret'),
      '--turn-ttl',
      '600',
    ]);
    w = worker(port);
    // The tab's job panel polled the server while it restarted: only what the tab logs from here on counts.
    console.length = 0;
    errors.length = 0;
    await clickJoin(tab);
    // While the tab is in the job: its peer id, and what the job's page shows with peers in it.
    const { peerId, detail } = await tabInJob(base, tab, errors);
    await reach(tab, errors, 'finished', 240_000, w);
    expect(await tab.textContent('[data-testid=join-note]'), w.err.slice(-2000)).toContain(
      `Training finished: ${STEPS} steps`,
    );
    expect(await tab.textContent('[data-testid=own-steps]')).toBe(String(STEPS));
    expect(await tab.evaluate(() => (window as unknown as { largestRing: number }).largestRing)).toBe(2);
    expect(Number.parseFloat((await tab.textContent('[data-testid=own-bytes]')) ?? '0')).toBeGreaterThan(0);
    expect(await w.exit, w.err).toBe(0);
    expect(w.lines.find((l) => l.event === 'result')).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
    expect(errors).toEqual([]);

    // Both peers took a relay from coturn, each with its own credential; the tab's names its peer id.
    const minted = allocatedCredentials(coturn, SECRET);
    expect(minted.length, coturn.log().slice(-3000)).toBe(2);
    expect(
      minted.filter((m) => m.username.endsWith(`:${peerId}`)),
      JSON.stringify(minted),
    ).toHaveLength(1);
    const publicText = await Promise.all(
      [
        fetch(`${base}/api/jobs`),
        fetch(`${base}/api/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } }),
        fetch(`${base}/metrics`),
      ].map(async (r) => (await r).text()),
    );
    const shown = {
      href: await tab.evaluate(() => location.href),
      console: console.join('\n'),
      publicText: [detail, ...publicText].join('\n'),
      serverOutput: relayed.out + relayed.err,
    };
    for (const [where, text] of Object.entries(shown)) {
      for (const { username, credential } of minted) {
        expect(text, where).not.toContain(credential);
        expect(text, where).not.toContain(username);
      }
      expect(text, where).not.toContain(SECRET);
    }
    await tab.close();
  }, 500_000);
});
