/**
 * The demo's main path: workers are already training an elastic job when a
 * volunteer opens the page and clicks Join. The ring re-forms to take the tab
 * in (it starts at the workers' step with their weights), trains as one of
 * three, and when the tab clicks Leave the workers carry on as two. Real
 * server, real Deno workers, real Chromium, real WebRTC.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { openTab, pageSays, screenshot, usePageFixture } from './serve-page.ts';
import {
  killStartedWorkers,
  lastStep as last,
  requireNetns,
  seen,
  startDenoWorker,
  until,
} from '../support/workers.ts';

const JOB = {
  id: 'volunteers',
  token: 'tok-volunteers',
  config: {
    model: 'mlp',
    optimizer: 'sgd',
    hyperparameters: { lr: 0.05, seed: 4, steps: 100_000, elastic: true },
    batchPerPeer: 16,
    minPeers: 2,
    maxPeers: 3,
  },
};

const fx = usePageFixture({ jobs: [JOB] });
afterAll(killStartedWorkers);

const startWorker = () => startDenoWorker(fx.server.url, JOB);

describe('a tab joins a running elastic job', () => {
  it(
    'is taken into the ring mid-run, trains as one of three, and leaves without stopping the workers',
    { timeout: 600_000 },
    async () => {
      requireNetns();
      const [a, b] = [startWorker(), startWorker()];
      await until(() => last(a).step >= 5 && last(b).step >= 5, 'the workers to take 5 steps', 180_000);

      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}&token=${JOB.token}`);
      // A page wait that times out says what the tab and the workers were doing.
      const explain = async (e: Error): Promise<never> => {
        throw new Error(`${e.message}\npage: ${await pageSays(page, errors)}${seen([a, b])}`);
      };
      await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 }).catch(explain);
      const stepBeforeJoin = last(a).step;
      await page.click('[data-testid=join]');
      await page.waitForSelector('[data-testid=ring][data-size="3"]', { timeout: 240_000 }).catch(explain);
      await page
        .waitForFunction(() => Number(document.querySelector('[data-testid=own-steps]')?.textContent) >= 3, undefined, {
          timeout: 240_000,
        })
        .catch(explain);
      await until(
        () => last(a).size === 3 && last(b).size === 3,
        'the workers to train in a ring of three',
        180_000,
        () => seen([a, b]),
      );
      // The tab started where the workers were, not at step 0: its own step (the panel's live
      // count, unlike the job's step, which the page polls from the server) is past the step
      // before the join (a tab that started at 0 would show about 3 here).
      const tabStep = Number(await page.textContent('[data-testid=own-steps]'));
      expect(tabStep, await pageSays(page, errors)).toBeGreaterThan(stepBeforeJoin);
      await screenshot(page, 'elastic-tab-joined');

      await page.click('[data-testid=leave]');
      await page.waitForSelector('[data-testid=participate][data-state=left]', { timeout: 60_000 }).catch(explain);
      const stepAtLeave = Math.max(last(a).step, last(b).step);
      // The workers re-form as two and keep going.
      await until(
        () => [a, b].every((w) => last(w).size === 2 && last(w).step >= stepAtLeave + 5),
        'the workers to carry on as two',
        240_000,
        () => seen([a, b]),
      );
      expect(a.child.exitCode, a.stderr.slice(-2000)).toBeNull();
      expect(b.child.exitCode, b.stderr.slice(-2000)).toBeNull();
      expect(errors).toEqual([]);
      await page.close();
    },
  );
});
