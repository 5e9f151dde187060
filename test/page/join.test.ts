/**
 * The end-to-end test: the signaling server with one Deno worker, and
 * two Chromium tabs that open the page and join. All three train one model over
 * real WebRTC; the tabs show the ring of 3, their own contribution, and a loss
 * that falls. Then a tab clicks Leave mid-run and the others stop, naming it; the
 * same tab joins again (its kernels already compiled) and closes mid-run, and the
 * others stop again, naming it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { openTab, screenshot, usePageFixture, waitForTrainingEnd } from './serve-page.ts';
import { recoveryArgs } from '../support/workers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const config = (steps: number) => ({
  model: 'mlp',
  optimizer: 'sgd',
  hyperparameters: { lr: 0.05, steps, seed: 3 },
  batchPerPeer: 32,
  minPeers: 3,
  maxPeers: 3,
});
const STEPS = 12;
const JOBS = [
  { id: 'three', token: 'tok-three', config: config(STEPS) },
  // Long enough that a tab can leave in the middle.
  { id: 'leaver', token: 'tok-leaver', config: config(5000) },
];

// Two tabs train at once: neither may be throttled as a background tab.
const fx = usePageFixture(
  { jobs: JOBS },
  {
    extraArgs: [
      '--disable-background-timer-throttling',
      '--disable-backgrounding-occluded-windows',
      '--disable-renderer-backgrounding',
    ],
  },
);

interface Worker {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exit: Promise<number | null>;
}

function denoWorker(job: { id: string; token: string }): Worker {
  const child = spawn(
    process.execPath,
    [
      'bin/ringtrain.js',
      'worker',
      '--server',
      fx.server.url,
      '--job',
      job.id,
      '--token',
      job.token,
      '--runtime',
      'deno',
      '--name',
      'deno-worker',
      '--json',
      ...recoveryArgs(),
    ],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const w: Worker = {
    child,
    stdout: '',
    stderr: '',
    exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
  };
  child.stdout!.on('data', (d) => (w.stdout += String(d)));
  child.stderr!.on('data', (d) => (w.stderr += String(d)));
  return w;
}

async function joinFrom(page: Page): Promise<void> {
  await page.waitForSelector('[data-testid=adapter][data-state]', { timeout: 60_000 });
  expect(
    await page.getAttribute('[data-testid=adapter]', 'data-state'),
    (await page.textContent('[data-testid=adapter]')) ?? '',
  ).toBe('ready');
  await page.waitForSelector('[data-testid=join]:not([disabled])');
  await page.click('[data-testid=join]');
}

const lossSeries = async (page: Page): Promise<number[]> =>
  JSON.parse((await page.getAttribute('[data-testid=chart-loss]', 'data-values')) ?? '[]') as number[];

describe('two tabs and a Deno worker train together', () => {
  it(
    `all three reach step ${STEPS} in lockstep, the loss falls, and each tab shows a ring of 3`,
    { timeout: 600_000 },
    async () => {
      let worker: Worker | undefined;
      try {
        const tabs = await Promise.all(
          [0, 1].map(() => openTab(fx.browser, `${fx.server.url}/?job=${JOBS[0].id}&token=${JOBS[0].token}`)),
        );
        // The tabs join first (ranks 0 and 1, in join order), then the worker.
        await joinFrom(tabs[0].page);
        await tabs[0].page.waitForSelector('[data-testid=peer-count]:text("1")', { timeout: 120_000 });
        await joinFrom(tabs[1].page);
        await tabs[0].page.waitForSelector('[data-testid=peer-count]:text("2")', { timeout: 120_000 });
        worker = denoWorker(JOBS[0]);
        for (const { page } of tabs) {
          await page.waitForSelector('[data-testid=participate][data-state=joined]', { timeout: 240_000 });
          await page.waitForSelector('[data-testid=ring][data-size="3"]', { timeout: 60_000 });
        }
        await tabs[0].page.waitForFunction(
          () => Number(document.querySelector('[data-testid=own-steps]')?.textContent) >= 3,
          undefined,
          { timeout: 120_000 },
        );
        // Mid-run: a ring of 3 with this tab marked, links carrying bytes.
        for (const { page } of tabs) {
          expect(await page.locator('[data-testid=ring-svg] g.peer').count()).toBe(3);
          expect(await page.locator('[data-testid=ring-svg] g.peer.self').count()).toBe(1);
          expect(await page.textContent('[data-testid=peer-count]')).toBe('3');
        }
        await screenshot(tabs[0].page, 'join-tab-a-training');

        for (const { page, errors } of tabs) {
          expect(await waitForTrainingEnd(page, errors, 400_000)).toContain(`Training finished: ${STEPS} steps`);
          expect(await page.textContent('[data-testid=own-steps]')).toBe(String(STEPS));
          const losses = await lossSeries(page);
          expect(losses.length).toBeGreaterThanOrEqual(STEPS);
          const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
          expect(mean(losses.slice(-3))).toBeLessThan(mean(losses.slice(0, 3)));
          expect(Number.parseFloat((await page.textContent('[data-testid=own-bytes]')) ?? '0')).toBeGreaterThan(0);
        }
        const ranks = await Promise.all(
          tabs.map(({ page }) => page.getAttribute('[data-testid=participate]', 'data-rank')),
        );
        expect(ranks).toEqual(['0', '1']);
        // Every tab, rank 0 or not, gets the job's final weights: each predicts test digits with the job's model.
        for (const { page } of tabs) {
          await page.waitForSelector('[data-testid=predictions][data-state=attached]');
          await page.waitForFunction(() => document.querySelectorAll('[data-testid=samples] li').length === 12);
        }
        await screenshot(tabs[0].page, 'join-tab-a-done');
        await screenshot(tabs[1].page, 'join-tab-b-done');

        const code = await worker.exit;
        const summary = JSON.parse(worker.stdout.trim().split('\n').pop()!) as {
          steps: number;
          size: number;
          runtime: string;
          links: { peer: number; transport: string }[];
        };
        expect(summary, worker.stderr).toMatchObject({ steps: STEPS, size: 3, runtime: 'deno' });
        // The worker listens for TCP links, but a tab cannot dial: both of its links are WebRTC.
        expect(summary.links.map((l) => l.transport)).toEqual(['webrtc', 'webrtc']);
        // Exit 3 means the ring broke; that is allowed only after the last step (a peer that finished
        // first left while this one was still in the final evaluation), which the summary above shows.
        expect([0, 3], worker.stderr).toContain(code);
        for (const { errors } of tabs) expect(errors).toEqual([]);
        for (const { page } of tabs) await page.close();
      } finally {
        worker?.child.kill('SIGKILL');
      }
    },
  );

  it(
    'a tab that clicks Leave mid-run stops the others with a message naming it; joined again, it closes, and the same happens',
    { timeout: 600_000 },
    async () => {
      const job = JOBS[1];
      const link = `${fx.server.url}/?job=${job.id}&token=${job.token}`;
      const [leaver, firstStayer] = await Promise.all([0, 1].map(() => openTab(fx.browser, link)));
      await stopsTheOthers(job, leaver.page, firstStayer.page, 'clicks Leave');
      // Every peer of that ring is gone, so the job starts afresh with whoever joins next: the tab that left
      // (Join enabled again) and a new tab.
      await leaver.page.waitForSelector('[data-testid=peer-count]:text("0")', { timeout: 60_000 });
      const secondStayer = await openTab(fx.browser, link);
      await stopsTheOthers(job, leaver.page, secondStayer.page, 'closes');
      for (const { page } of [firstStayer, secondStayer]) await page.close();
    },
  );
});

/**
 * `leaver` and `stayer` join `job` beside a Deno worker; once both have taken 2 steps, `leaver` goes as `how` says,
 * and both the stayer tab and the worker stop, naming its rank.
 */
async function stopsTheOthers(
  job: (typeof JOBS)[number],
  leaver: Page,
  stayer: Page,
  how: 'closes' | 'clicks Leave',
): Promise<void> {
  const worker = denoWorker(job);
  try {
    for (const page of [leaver, stayer]) await joinFrom(page);
    await leaver.waitForSelector('[data-testid=participate][data-state=joined]', { timeout: 300_000 });
    // The stayer's steps (the ring goes in lockstep): a tab that joined again shows its last membership's count
    // until its first new step.
    await stayer.waitForFunction(
      () => Number(document.querySelector('[data-testid=own-steps]')?.textContent) >= 2,
      undefined,
      { timeout: 300_000 },
    );
    const leaverRank = await leaver.getAttribute('[data-testid=participate]', 'data-rank');
    if (how === 'closes') await leaver.close({ runBeforeUnload: true });
    else {
      await leaver.click('[data-testid=leave]');
      await leaver.waitForSelector('[data-testid=participate][data-state=left]', { timeout: 60_000 });
      expect(await leaver.textContent('[data-testid=join-note]')).toContain('Left the job');
      expect(await leaver.isEnabled('[data-testid=join]')).toBe(true);
      expect(await leaver.isDisabled('[data-testid=leave]')).toBe(true);
    }

    await stayer
      .waitForSelector('[data-testid=participate][data-state=finished]', { timeout: 60_000 })
      .catch(async (err) => {
        throw new Error(
          `${String(err)}\nstayer: ${await stayer.textContent('[data-testid=participate]')}\nworker: ${worker.stderr.slice(-2000)}`,
        );
      });
    const note = (await stayer.textContent('[data-testid=join-note]')) ?? '';
    expect(note).toContain('Training stopped');
    expect(note).toContain(`rank ${leaverRank}`);
    // The job no longer counts the tab that went (the others then leave too, having stopped).
    await stayer.waitForFunction(
      () => Number(document.querySelector('[data-testid=peer-count]')?.textContent) < 3,
      undefined,
      { timeout: 30_000 },
    );
    await screenshot(stayer, how === 'closes' ? 'join-after-a-tab-closed' : 'join-after-a-tab-left');
    // The worker stops too, cleanly, naming the rank that left (exit 3: the ring broke).
    expect(await worker.exit, worker.stderr).toBe(3);
    expect(worker.stderr).toContain(`rank ${leaverRank}`);
  } finally {
    worker.child.kill('SIGKILL');
  }
}
