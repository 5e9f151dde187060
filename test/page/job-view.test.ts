/**
 * The job panel and the live ring in real Chromium, fed by peers that report
 * to the real server as workers do (signaling clients): a job that finished
 * shows as finished (its last step, its accuracy, Join disabled, no "Waiting
 * for peers"), its settings are a table, its tables fit their panel, and the
 * ring's rate labels stay inside the picture and apart from 2 to 8 peers.
 * Screenshots go to test-results/page/ (git-ignored).
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import { FINISHED_LEAVE_REASON } from '../../src/signaling/protocol.ts';
import { openTab, screenshot, usePageFixture } from './serve-page.ts';

const job = (id: string, maxPeers: number) => ({
  id,
  token: `${id}-token`,
  config: {
    model: 'mlp',
    optimizer: 'adamw',
    hyperparameters: { lr: 0.02, steps: 400, seed: 1, globalBatch: 64 },
    batchPerPeer: 32,
    minPeers: 2,
    maxPeers,
  },
});
const FINISH = job('finish', 2);
const RING = job('ring', 8);

const fx = usePageFixture({ jobs: [FINISH, RING] });

async function peers(id: string, token: string, n: number): Promise<SignalingClient[]> {
  const clients: SignalingClient[] = [];
  for (let i = 0; i < n; i++)
    clients.push(await connect(fx.server.url, { job: id, token, name: `worker-${i}`, runtime: 'node' }));
  return clients;
}

/** Every table of the job panel ends inside the panel's card: nothing to scroll sideways. */
async function tablesFit(page: Page): Promise<{ table: string; overflow: number }[]> {
  return page.$$eval('[data-testid=job] table', (tables) =>
    tables.map((t) => {
      const card = t.closest('.card')!.getBoundingClientRect();
      return {
        table: t.getAttribute('data-testid') ?? '',
        overflow: Math.max(0, t.getBoundingClientRect().right - card.right),
      };
    }),
  );
}

describe('the job panel', () => {
  it('shows a finished job as finished, with its accuracy, its settings as a table, and Join disabled', async () => {
    const clients = await peers(FINISH.id, FINISH.token, 2);
    try {
      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${FINISH.id}#token=${FINISH.token}`);
      await page.waitForSelector('[data-testid=peer-count]:text("2")');
      // As workers report: steps, an evaluation, more steps (which carry no accuracy), the final step.
      for (const c of clients)
        c.reportProgress({ step: 200, epoch: 0, loss: 0.9, samplesPerS: 50, allreduceBytes: 1e6 });
      for (const c of clients) c.reportProgress({ step: 200, epoch: 0, testAccuracy: 0.875, testLoss: 0.4 });
      for (const c of clients)
        c.reportProgress({ step: 388, epoch: 1, loss: 0.5, samplesPerS: 50, allreduceBytes: 2e6 });
      await page.waitForSelector('[data-testid=step]:text("388")');
      // The accuracy stands beside the chart that plots it, though the last report had none.
      await page.waitForSelector('[data-testid=chart-accuracy][data-points="1"]');
      expect(await page.textContent('[data-testid=accuracy]')).toBe('87.5%');

      for (const c of clients)
        c.reportProgress({ step: 400, loss: 0.45, testAccuracy: 0.9, testLoss: 0.35, allreduceBytes: 3e6 });
      for (const c of clients) await c.leave(FINISHED_LEAVE_REASON);
      await page.waitForSelector('[data-testid=job][data-state=finished]');
      const status = (await page.textContent('[data-testid=job-status]'))!;
      expect(status).toContain('Training finished at step 400');
      expect(status).not.toContain('Waiting for peers');
      expect(await page.textContent('[data-testid=step]')).toBe('400');
      expect(await page.textContent('[data-testid=accuracy]')).toBe('90.0%');
      expect(await page.textContent('[data-testid=peer-count]')).toBe('0');
      // Join stays disabled whether or not this browser could train, and says why.
      await page.waitForSelector('[data-testid=adapter]:is([data-state=ready], [data-state=missing])');
      await page.waitForSelector('[data-testid=participate][data-state=finished]');
      expect(await page.isDisabled('[data-testid=join]')).toBe(true);
      expect(await page.getAttribute('[data-testid=join]', 'title')).toContain('The job has finished at step 400');
      expect(await page.textContent('[data-testid=ring-summary]')).toContain('The job has finished');

      const settings = await page.$$eval('[data-testid=settings] tr', (rows) =>
        rows.map((r) => [r.querySelector('th')?.textContent, r.querySelector('td')?.textContent]),
      );
      expect(settings).toEqual(
        expect.arrayContaining([
          ['model', 'mlp'],
          ['optimizer', 'adamw'],
          ['lr', '0.02'],
          ['steps', '400'],
          ['global batch', '64'],
          ['peers allowed', '2 to 2'],
        ]),
      );
      expect(await tablesFit(page)).toEqual([
        { table: 'settings', overflow: 0 },
        { table: 'peers', overflow: 0 },
      ]);
      await screenshot(page, 'job-finished');
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      for (const c of clients) await c.leave().catch(() => undefined);
    }
  });
});

/** The rate labels' boxes: inside the ring's picture, and not on top of one another. */
async function labelBoxes(page: Page): Promise<{ inside: boolean; overlaps: number; count: number }> {
  return page.$eval('[data-testid=ring-svg]', (svg) => {
    const frame = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll('.link-label')].map((l) => l.getBoundingClientRect());
    const inside = boxes.every(
      (b) =>
        b.left >= frame.left - 0.5 &&
        b.right <= frame.right + 0.5 &&
        b.top >= frame.top - 0.5 &&
        b.bottom <= frame.bottom + 0.5,
    );
    let overlaps = 0;
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i];
        const b = boxes[j];
        if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) overlaps++;
      }
    }
    return { inside, overlaps, count: boxes.length };
  });
}

describe('the live ring', () => {
  it('keeps every link rate inside the picture and apart, from 2 to 8 peers', async () => {
    for (const n of [2, 8]) {
      const clients = await peers(RING.id, RING.token, n);
      try {
        const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${RING.id}#token=${RING.token}`);
        await page.waitForSelector(`[data-testid=ring][data-size="${n}"]`);
        // Two reports a second apart: each rank's bytes give its outgoing link a rate (megabytes a second).
        for (const [k, step] of [1, 2].entries()) {
          for (const [i, c] of clients.entries())
            c.reportProgress({
              step,
              loss: 1,
              samplesPerS: 10,
              allreduceBytes: (k + 1) * (12_000_000 + i * 1_000_000),
            });
          await page.waitForSelector(`[data-testid=step]:text("${step}")`);
        }
        await page.waitForFunction(
          (want) => document.querySelectorAll('[data-testid=ring-svg] .link-label').length === want,
          n,
        );
        const boxes = await labelBoxes(page);
        expect(boxes).toEqual({ inside: true, overlaps: 0, count: n });
        expect(await tablesFit(page)).toEqual([
          { table: 'settings', overflow: 0 },
          { table: 'peers', overflow: 0 },
        ]);
        await screenshot(page, `ring-${n}-peers`);
        expect(errors).toEqual([]);
        await page.close();
      } finally {
        for (const c of clients) await c.leave().catch(() => undefined);
      }
    }
  });
});
