import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gotoSteady, launchChromium, type LaunchedChromium } from '../support/chromium.ts';
import { buildAndServePage, type ServedPage } from '../support/page-server.ts';

let browser: LaunchedChromium;
let site: ServedPage;

beforeAll(async () => {
  site = await buildAndServePage();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await site?.close();
});

describe('the page trains in headless Chromium', () => {
  it('finds a WebGPU adapter, trains the MLP, and the loss falls', { timeout: 300_000 }, async () => {
    const page = await browser.newPage();
    const steps = 20;
    await gotoSteady(page, `${site.url}?steps=${steps}`);
    const adapter = page.getByTestId('adapter');
    await adapter.and(page.locator('[data-state]')).waitFor({ timeout: 60_000 });
    expect(
      await adapter.getAttribute('data-state'),
      `${await adapter.textContent()}\n${browser.errors.join('\n')}`,
    ).toBe('ready');

    await page.getByTestId('train-local').click();
    const status = page.getByTestId('local-status');
    await status.and(page.locator('[data-state]')).waitFor({ timeout: 240_000 });
    expect(await status.getAttribute('data-state'), `${await status.textContent()}\n${browser.errors.join('\n')}`).toBe(
      'done',
    );

    expect(await page.getByTestId('local-step').textContent()).toBe(String(steps));
    const losses = JSON.parse((await page.getByTestId('local-loss').getAttribute('data-losses')) ?? '[]') as number[];
    expect(losses.length).toBe(steps);
    for (const l of losses) expect(Number.isFinite(l)).toBe(true);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const first = mean(losses.slice(0, 5)),
      last = mean(losses.slice(-5));
    // Softmax over 10 classes starts near ln 10 ≈ 2.3; a learning MLP is well below that within 20 steps.
    expect(first).toBeGreaterThan(1.5);
    expect(last).toBeLessThan(first * 0.7);
    expect(await status.textContent()).toMatch(/done: test accuracy \d+\.\d%/);

    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/browser-train.png', fullPage: true });
    expect(browser.errors).toEqual([]);
  });
});
