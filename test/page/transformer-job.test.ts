/**
 * A transformer job in the page: a Chromium tab (WebGPU on SwiftShader) and a
 * Deno worker train the words transformer together over real WebRTC. The tab
 * shows validation loss and perplexity where a classifier shows accuracy, and
 * its "Generate" box samples words from the weights the tab holds.
 */
import { describe, expect, it } from 'vitest';
import { startDenoWorker } from '../support/workers.ts';
import { joinAndTrain, screenshot, usePageFixture } from './serve-page.ts';

const STEPS = 3;
// The words recipe's settings as `ringtrain run --model transformer` writes them, a few steps and a small validation
// glance.
const JOB = {
  id: 'words',
  token: 'tok-words',
  config: {
    model: 'transformer',
    optimizer: 'adamw',
    hyperparameters: {
      lr: 0.003,
      weightDecay: 0.01,
      steps: STEPS,
      seed: 2,
      sampling: 'replacement',
      warmupFrom: 'zero',
      warmupSteps: 100,
      evalLimit: 16,
    },
    batchPerPeer: 4,
    minPeers: 2,
    maxPeers: 2,
  },
};
const fx = usePageFixture({ jobs: [JOB] });

describe('a transformer job in the page', () => {
  it(
    'trains with a Deno worker, shows the validation loss and generates words from the tab’s weights',
    { timeout: 600_000 },
    async () => {
      const worker = startDenoWorker(fx.server.url, JOB);
      try {
        const { page, errors, note } = await joinAndTrain(
          fx.browser,
          `${fx.server.url}/?job=${JOB.id}#token=${JOB.token}`,
        );
        expect(note, worker.stderr).toMatch(
          new RegExp(`Training finished: ${STEPS} steps, validation loss \\d+\\.\\d+ \\(perplexity \\d+\\.\\d+\\)`),
        );
        // The job panel shows the validation loss (the server's copy of the peers' progress), not an accuracy.
        expect(await page.textContent('[data-testid=metric-label]')).toBe('Validation loss');
        await page.waitForFunction(
          () => /perplexity/.test(document.querySelector('[data-testid=accuracy]')?.textContent ?? ''),
          undefined,
          { timeout: 30_000 },
        );
        const chart = page.locator('[data-testid=chart-accuracy]');
        await page.waitForSelector('[data-testid=chart-accuracy][data-metric=validation-loss][data-values]', {
          timeout: 30_000,
        });
        const values = JSON.parse((await chart.getAttribute('data-values')) ?? '[]') as number[];
        expect(values.at(-1)).toBeGreaterThan(0);
        expect(values.at(-1)).toBeLessThan(6); // nats per character, not a percentage
        // Generate: words spelled by the tab's copy of the job's weights.
        await page.waitForSelector('[data-testid=words-panel][data-state=attached]', { timeout: 60_000 });
        await page.click('[data-testid=generate]');
        await page.waitForSelector('[data-testid=words-panel][data-state=generated]', { timeout: 120_000 });
        const words = await page.locator('[data-testid=words] li').allTextContents();
        expect(words).toHaveLength(8);
        for (const w of words) expect(w).toMatch(/^[a-z]{1,31}$/);
        await screenshot(page, 'transformer-job');
        expect(errors).toEqual([]);
        expect(await worker.exit, worker.stderr).toBe(0);
        expect(worker.result).toMatchObject({ steps: STEPS, size: 2 });
        await page.close();
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
  );
});
