/**
 * The TF.js page variant end to end: `ringtrain launch -np 1 --tabs 1`
 * starts the real signaling server (serving the built page) and one Node
 * process of examples/tfjs-mnist.ts; a Chromium tab opens the link launch
 * prints and clicks Join. The tab loads TF.js from the page's bundle and runs
 * the same training as the Node rank, over real WebRTC. Both end with the same
 * weights, so both report the same test accuracy; the page draws the TF.js
 * job's ring and steps from the same events as any other job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forEachLine } from '../../src/core/lines.node.ts';
import { launchChromium, type LaunchedChromium } from '../support/chromium.ts';
import { requireNetns, until } from '../support/workers.ts';
import { buildPage, openTab, screenshot } from './serve-page.ts';

const TRAIN_EXAMPLES = 512;
const BATCH = 16;
/** 512 digits over 2 ranks at 16 each, one epoch. */
const STEPS = TRAIN_EXAMPLES / 2 / BATCH;
const ARGS = ['--epochs', '1', '--batch', String(BATCH), '--lr', '0.05', '--train-examples', String(TRAIN_EXAMPLES), '--test-examples', '200'];

let built: { dir: string; dispose(): void } | undefined;
let browser: LaunchedChromium | undefined;
let launcher: ChildProcess | undefined;
beforeAll(async () => {
  built = await buildPage();
  browser = await launchChromium();
}, 300_000);
afterAll(async () => {
  launcher?.kill('SIGTERM');
  await browser?.close();
  built?.dispose();
});

describe('a Chromium tab joins a TF.js job beside a launch rank', () => {
  it(`trains ${STEPS} steps with the Node rank over WebRTC and ends with the same model`, { timeout: 600_000 }, async () => {
    requireNetns();
    const lines: string[] = [];
    let stderr = '';
    const child = spawn(process.execPath, ['bin/ringtrain.js', 'launch', '-np', '1', '--tabs', '1', '--static', built!.dir, 'examples/tfjs-mnist.ts', ...ARGS], { stdio: ['ignore', 'pipe', 'pipe'] });
    launcher = child;
    forEachLine(child.stdout!, (line) => lines.push(line));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    await until(() => lines.some((l) => l.startsWith('[launch] page ')), 'launch to print the page link', 60_000);
    const link = lines.find((l) => l.startsWith('[launch] page '))!.slice('[launch] page '.length);
    const { page, errors } = await openTab(browser!, link);
    // The Node rank joins first (rank 0: it prints the summary), then the tab.
    await page.waitForSelector('[data-testid=peer-count]:text("1")', { timeout: 120_000 });
    await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 });
    await page.click('[data-testid=join]');
    await page.waitForSelector('[data-testid=participate][data-state=joined]', { timeout: 240_000 });
    expect(await page.getAttribute('[data-testid=participate]', 'data-rank')).toBe('1');
    // Mid-run the page draws the TF.js job from the same events as any other: a ring of two, this tab in it.
    await page.waitForSelector('[data-testid=ring][data-size="2"]', { timeout: 120_000 });
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=ring-svg] g.peer').length === 2, undefined, { timeout: 30_000 });
    expect(await page.locator('[data-testid=ring-svg] g.peer.self').count()).toBe(1);

    await page.waitForSelector('[data-testid=participate]:is([data-state=finished], [data-state=error])', { timeout: 400_000 });
    const note = (await page.textContent('[data-testid=join-note]')) ?? '';
    expect(note, `${note}\n${stderr.slice(-3000)}`).toMatch(/^Training finished: \d+ steps, test accuracy [\d.]+% \(TF\.js, cpu backend\)\.$/);
    // Its own steps and bytes, and a loss point per step, from the TF.js rank's train-step events.
    expect(await page.textContent('[data-testid=own-steps]')).toBe(String(STEPS));
    expect(Number.parseFloat((await page.textContent('[data-testid=own-bytes]')) ?? '0')).toBeGreaterThan(0);
    const losses = JSON.parse((await page.getAttribute('[data-testid=chart-loss]', 'data-values')) ?? '[]') as number[];
    expect(losses.length).toBeGreaterThanOrEqual(STEPS);
    await screenshot(page, 'tfjs-job-done');

    expect(await exit, stderr.slice(-3000)).toBe(0);
    const summary = JSON.parse(lines.find((l) => l.startsWith('[0] {'))!.slice(4)) as { size: number; steps: number; testAccuracy: number };
    expect(summary).toMatchObject({ size: 2, steps: STEPS });
    // Far above chance (10%) after so few steps, and the same figure on both ranks: one model, trained together.
    expect(summary.testAccuracy).toBeGreaterThan(0.3);
    expect(note).toContain(`${STEPS} steps, test accuracy ${(summary.testAccuracy * 100).toFixed(1)}%`);
    // The launcher ends with its workers and takes the page's server with it: the job panel's later polls are refused.
    expect(errors.filter((e) => !e.includes('net::ERR_CONNECTION_REFUSED'))).toEqual([]);
    await page.close();
  });
});
