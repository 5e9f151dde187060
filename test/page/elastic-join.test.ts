/**
 * The demo's main path: workers are already training an elastic job when a
 * volunteer opens the page and clicks Join. The ring re-forms to take the tab
 * in (it starts at the workers' step with their weights), trains as one of
 * three, and when the tab clicks Leave the workers carry on as two. Real
 * server, real Deno workers, real Chromium, real WebRTC.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../server/index.ts';
import { launchChromium, type LaunchedChromium } from '../support/chromium.ts';
import { buildPage, openTab, screenshot, servePage } from './serve-page.ts';

const JOB = { id: 'volunteers', token: 'tok-volunteers', config: { model: 'mlp', optimizer: 'sgd', hyperparameters: { lr: 0.05, seed: 4, steps: 100_000, elastic: true }, batchPerPeer: 16, minPeers: 2, maxPeers: 3 } };

interface Worker {
  child: ChildProcess;
  steps: { step: number; size: number }[];
  stderr: string;
}

let built: { dir: string; dispose(): void };
let server: RunningServer;
let browser: LaunchedChromium;
const workers: Worker[] = [];

beforeAll(async () => {
  built = await buildPage();
  server = await servePage(built.dir, { jobs: [JOB] });
  browser = await launchChromium();
});

afterAll(async () => {
  for (const w of workers) w.child.kill('SIGKILL');
  await browser?.close();
  await server?.close();
  built?.dispose();
});

function startWorker(): Worker {
  const child = spawn('node_modules/.bin/deno', ['run', '-A', 'src/cli/main.ts', 'worker', '--server', server.url, '--job', JOB.id, '--token', JOB.token, '--events'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const w: Worker = { child, steps: [], stderr: '' };
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    partial += d;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const m = JSON.parse(line);
      if (m.event === 'step') w.steps.push({ step: m.step, size: m.size });
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
  workers.push(w);
  return w;
}

async function until(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const last = (w: Worker) => w.steps[w.steps.length - 1] ?? { step: 0, size: 0 };

describe('a tab joins a running elastic job', () => {
  it('is taken into the ring mid-run, trains as one of three, and leaves without stopping the workers', { timeout: 600_000 }, async () => {
    if (process.env.RINGTRAIN_NETNS !== '1') throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
    const [a, b] = [startWorker(), startWorker()];
    await until(() => last(a).step >= 5 && last(b).step >= 5, 'the workers to take 5 steps', 180_000);

    const { page, errors } = await openTab(browser, `${server.url}/?job=${JOB.id}&token=${JOB.token}`);
    await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 });
    const stepBeforeJoin = last(a).step;
    await page.click('[data-testid=join]');
    await page.waitForSelector('[data-testid=ring][data-size="3"]', { timeout: 240_000 });
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=own-steps]')?.textContent) >= 3, undefined, { timeout: 240_000 });
    await until(() => last(a).size === 3 && last(b).size === 3, 'the workers to train in a ring of three', 60_000);
    // The tab started where the workers were, not at step 0.
    const tabStep = Number(await page.textContent('[data-testid=step]'));
    expect(tabStep).toBeGreaterThan(stepBeforeJoin);
    await screenshot(page, 'elastic-tab-joined');

    await page.click('[data-testid=leave]');
    await page.waitForSelector('[data-testid=participate][data-state=left]', { timeout: 60_000 });
    const stepAtLeave = Math.max(last(a).step, last(b).step);
    // The workers re-form as two and keep going.
    await until(() => [a, b].every((w) => last(w).size === 2 && last(w).step >= stepAtLeave + 5), 'the workers to carry on as two', 120_000);
    expect(a.child.exitCode, a.stderr.slice(-2000)).toBeNull();
    expect(b.child.exitCode, b.stderr.slice(-2000)).toBeNull();
    expect(errors).toEqual([]);
    await page.close();
  });
});
