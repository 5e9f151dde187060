/**
 * The page in real headless Chromium, served by the real signaling server.
 * Teaching mode must reach the sum the test computes itself from the numbers
 * the page shows; the adapter panel must show Chromium's SwiftShader adapter;
 * the MLP trained alone on that adapter must learn, and predict digits;
 * the job panel and the ring must follow what the server says about a job, fed by peers
 * that report to the real server as workers do (signaling clients): a job that finished
 * shows as finished (its last step, its accuracy, Join disabled, no "Waiting for peers"),
 * its settings are a table, its tables fit their panel, and the ring's rate labels stay
 * inside the picture and apart from 2 to 8 peers. One server and one Chromium for all.
 * Screenshots go to test-results/page/ (git-ignored).
 */
import { describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import { FINISHED_LEAVE_REASON } from '../../src/signaling/protocol.ts';
import { openTab, screenshot, usePageFixture } from './serve-page.ts';
import { gotoSteady } from '../support/chromium.ts';

const JOB = {
  id: 'page-test',
  token: 'page-token',
  config: { model: 'mlp', optimizer: 'sgd', hyperparameters: { lr: 0.1 }, batchPerPeer: 32, minPeers: 2, maxPeers: 8 },
};

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

const fx = usePageFixture({ jobs: [JOB, FINISH, RING] });

async function numbersIn(page: Page, selector: string): Promise<number[][]> {
  return page.$$eval(selector, (rows) =>
    rows.map((r) => [...r.querySelectorAll('td')].map((td) => Number(td.textContent))),
  );
}

describe('teaching mode', () => {
  it('4 virtual peers reach, on every rank, the sum of the inputs the page shows', async () => {
    const { page, errors } = await openTab(fx.browser, `${fx.server.url}/`);
    await page.selectOption('[data-testid=teach-peers]', '4');
    await page.waitForSelector('[data-testid=teach][data-state=ready][data-frame="0"]');
    const inputs = await numbersIn(page, '[data-testid=teach-inputs] tbody tr');
    expect(inputs).toHaveLength(4);
    const sum = inputs[0].map((_, i) => inputs.reduce((s, row) => s + row[i], 0));
    expect(sum.every(Number.isFinite)).toBe(true);
    // Before the end, the page must not claim a result.
    expect(await page.textContent('[data-testid=teach-result]')).toContain('Not finished');

    let clicks = 0;
    while (await page.isEnabled('[data-testid=teach-step]')) {
      await page.click('[data-testid=teach-step]');
      clicks++;
      if (clicks === 2) await screenshot(page, 'teach-4-peers-reduce-scatter');
      expect(clicks).toBeLessThanOrEqual(20);
    }
    expect(clicks).toBe(2 * (4 - 1));
    const shown = (await page.textContent('[data-testid=teach-sum]'))!.trim().split(/\s+/).map(Number);
    expect(shown).toEqual(sum);
    for (const row of await numbersIn(page, '[data-testid=teach-buffers] tbody tr')) expect(row).toEqual(sum);
    expect(await page.getAttribute('[data-testid=teach-result]', 'data-agree')).toBe('true');
    expect(await page.textContent('[data-testid=teach-why]')).toContain('2(N−1)/N = 1.50');
    await screenshot(page, 'teach-4-peers-done');

    // Back and forward by keyboard.
    await page.focus('[data-testid=teach-back]');
    await page.keyboard.press('Enter');
    expect(await page.getAttribute('[data-testid=teach]', 'data-frame')).toBe(String(clicks - 1));
    expect(await page.textContent('[data-testid=teach-result]')).toContain('Not finished');
    await page.focus('[data-testid=teach-step]');
    await page.keyboard.press('Space');
    expect(await page.getAttribute('[data-testid=teach-result]', 'data-agree')).toBe('true');
    // Arrow keys step back and forth too.
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('ArrowLeft');
    expect(await page.getAttribute('[data-testid=teach]', 'data-frame')).toBe(String(clicks - 2));
    await page.keyboard.press('ArrowRight');
    expect(await page.getAttribute('[data-testid=teach]', 'data-frame')).toBe(String(clicks - 1));
    expect(errors).toEqual([]);
    await page.close();
  });

  it('play runs to the end by itself, and a narrow screen still shows every control', async () => {
    const { page, errors } = await openTab(fx.browser, `${fx.server.url}/`, { width: 390, height: 844 });
    await page.selectOption('[data-testid=teach-peers]', '3');
    await page.waitForSelector('[data-testid=teach][data-state=ready][data-frame="0"]');
    await page.fill('[data-testid=teach-speed]', '4');
    await page.click('[data-testid=teach-play]');
    await page.waitForSelector('[data-testid=teach-result][data-agree=true]', { timeout: 30_000 });
    expect(await page.getAttribute('[data-testid=teach]', 'data-frame')).toBe(String(2 * (3 - 1)));
    for (const id of ['teach-peers', 'teach-back', 'teach-play', 'teach-step', 'teach-speed', 'join', 'leave']) {
      expect(await page.isVisible(`[data-testid=${id}]`), id).toBe(true);
    }
    // Nothing wider than the screen except inside scrolling boxes.
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'narrow-teach-3-peers');
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('adapter panel', () => {
  it("shows Chromium's SwiftShader WebGPU adapter", async () => {
    const { page, errors } = await openTab(fx.browser, `${fx.server.url}/`);
    await page.waitForSelector('[data-testid=adapter][data-state]', { timeout: 60_000 });
    const state = await page.getAttribute('[data-testid=adapter]', 'data-state');
    const text = await page.textContent('[data-testid=adapter]');
    expect(state, `no adapter; the panel says: ${text}`).toBe('ready');
    expect(text?.toLowerCase()).toContain('swiftshader');
    expect(text).toContain('software (fallback) adapter');
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('a browser without WebGPU', () => {
  it('says so, says what to do, keeps Join disabled with the reason, and still teaches', async () => {
    const page = await fx.browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // What a browser without WebGPU looks like to the page: no navigator.gpu.
    await page.addInitScript(() =>
      Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined, configurable: true }),
    );
    await gotoSteady(page, `${fx.server.url}/?job=${JOB.id}&token=${JOB.token}`);
    await page.waitForSelector('[data-testid=adapter][data-state=missing]', { timeout: 60_000 });
    const text = (await page.textContent('[data-testid=adapter]')) ?? '';
    expect(text).toContain('no WebGPU adapter');
    expect(text).toContain('ERR_NO_ADAPTER');
    expect(text).toMatch(/Chrome or Edge/);
    const join = page.locator('[data-testid=join]');
    await page.waitForFunction(() =>
      (document.querySelector('[data-testid=join]') as HTMLElement | null)?.title.includes('WebGPU'),
    );
    expect(await join.isDisabled()).toBe(true);
    expect(await page.isDisabled('[data-testid=train-local]')).toBe(true);
    await page.waitForSelector('[data-testid=teach][data-state=ready]');
    await screenshot(page, 'no-webgpu');
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('training alone, then predictions', () => {
  it(
    'the page trains the MLP on its WebGPU adapter and the loss falls; then it shows test digits with guesses, and the pad guesses a digit',
    { timeout: 360_000 },
    async () => {
      const steps = 20;
      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?steps=${steps}`);
      await page.waitForSelector('[data-testid=adapter][data-state=ready]', { timeout: 60_000 });
      // Before any model, the pad has nothing to guess with.
      expect(await page.isDisabled('[data-testid=draw-sample]')).toBe(true);
      await page.click('[data-testid=train-local]');
      await page.waitForSelector('[data-testid=local-status][data-state]', { timeout: 240_000 });
      const status = (await page.textContent('[data-testid=local-status]')) ?? '';
      expect(await page.getAttribute('[data-testid=local-status]', 'data-state'), status).toBe('done');
      expect(status).toMatch(/done: test accuracy \d+\.\d%/);
      expect(await page.textContent('[data-testid=local-step]')).toBe(String(steps));
      const losses = JSON.parse(
        (await page.getAttribute('[data-testid=local-loss]', 'data-losses')) ?? '[]',
      ) as number[];
      expect(losses.length).toBe(steps);
      for (const l of losses) expect(Number.isFinite(l)).toBe(true);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const [first, last] = [mean(losses.slice(0, 5)), mean(losses.slice(-5))];
      // Softmax over 10 classes starts near ln 10 ≈ 2.3; a learning MLP is well below that within 20 steps.
      expect(first).toBeGreaterThan(1.5);
      expect(last).toBeLessThan(first * 0.7);
      await screenshot(page, 'browser-train');

      await page.waitForSelector('[data-testid=predictions][data-state=attached]');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=samples] li').length === 12);
      const labels = await page.$$eval('[data-testid=samples] li span', (spans) =>
        spans.map((s) => s.textContent ?? ''),
      );
      for (const l of labels) expect(l).toMatch(/^\d( ✓| ✗ \(is \d\))$/);
      expect(await page.textContent('[data-testid=predict-status]')).toMatch(/gets \d+ of these 12 test digits right/);
      await page.click('[data-testid=draw-sample]');
      await page.waitForFunction(() =>
        /^\d$/.test(document.querySelector('[data-testid=draw-guess]')?.textContent ?? ''),
      );
      await screenshot(page, 'predictions-after-local-training');
      expect(errors).toEqual([]);
      await page.close();
    },
  );
});

describe('a live job', () => {
  it('the page follows the server: peers, ring, step, loss, charts, and a peer leaving', async () => {
    const clients: SignalingClient[] = [];
    try {
      for (const name of ['alpha', 'beta', 'gamma']) {
        clients.push(await connect(fx.server.url, { job: JOB.id, token: JOB.token, name, runtime: 'node' }));
      }
      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}&token=${JOB.token}`);
      await page.waitForSelector('[data-testid=peer-count]:text("3")');
      await page.waitForSelector('[data-testid=ring][data-size="3"]');
      expect(await page.locator('[data-testid=ring-svg] g.peer').count()).toBe(3);

      // Progress as workers report it: lockstep steps and a falling loss.
      const losses = [2.3, 1.9, 1.4, 1.0];
      for (let step = 1; step <= losses.length; step++) {
        for (const c of clients)
          c.reportProgress({ step, loss: losses[step - 1], samplesPerS: 100, allreduceBytes: step * 2_000_000 });
        await page.waitForSelector(`[data-testid=step]:text("${step}")`);
      }
      expect(Number(await page.textContent('[data-testid=loss]'))).toBeCloseTo(losses[losses.length - 1], 4);
      await page.waitForSelector(`[data-testid=chart-loss][data-points="${losses.length}"]`);
      // Each rank's reported bytes are its outgoing link's traffic: the ring labels its links with rates.
      await page.waitForFunction(() =>
        /[kM]B\/s$/.test(document.querySelector('[data-testid=ring-svg] .link-label')?.textContent ?? ''),
      );
      const peerRows = await page.$$eval('[data-testid=peers] tbody tr', (rows) =>
        rows.map((r) => r.textContent ?? ''),
      );
      expect(peerRows.map((r) => ['alpha', 'beta', 'gamma'].find((n) => r.includes(n)))).toEqual([
        'alpha',
        'beta',
        'gamma',
      ]);
      // Join stays disabled, saying why, until the browser can join.
      const join = page.locator('[data-testid=join]');
      if (await join.isDisabled()) expect((await join.getAttribute('title'))?.length).toBeGreaterThan(10);
      await screenshot(page, 'live-job-3-peers');

      await clients[1].leave();
      await page.waitForSelector('[data-testid=peer-count]:text("2")');
      await page.waitForSelector('[data-testid=ring][data-size="2"]');
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      for (const c of clients) await c.leave().catch(() => undefined);
    }
  });
});

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
