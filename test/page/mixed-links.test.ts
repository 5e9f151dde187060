/**
 * A mixed job: two Deno workers and one Chromium tab train one model. The
 * workers link to each other by TCP and to the tab by WebRTC, in one ring;
 * nothing above the links knows, and all three finish every step.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openTab, usePageFixture, waitForTrainingEnd } from './serve-page.ts';
import { recoveryArgs } from '../support/workers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STEPS = 8;
const JOB = {
  id: 'mixed',
  token: 'tok-mixed',
  config: {
    model: 'mlp',
    optimizer: 'sgd',
    hyperparameters: { lr: 0.05, steps: STEPS, seed: 3 },
    batchPerPeer: 32,
    minPeers: 3,
    maxPeers: 3,
  },
};
const fx = usePageFixture({ jobs: [JOB] });

interface Worker {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exit: Promise<number | null>;
}

function denoWorker(name: string): Worker {
  const child = spawn(
    process.execPath,
    [
      'bin/ringtrain.js',
      'worker',
      '--server',
      fx.server.url,
      '--job',
      JOB.id,
      '--token',
      JOB.token,
      '--runtime',
      'deno',
      '--name',
      name,
      '--json',
      ...recoveryArgs(),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
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

type Summary = {
  rank: number;
  steps: number;
  size: number;
  links: { peer: number; transport: string }[];
  weights_crc32: number;
};

describe('two native workers and a tab in one ring', () => {
  it('links the workers by TCP and the tab by WebRTC, and all finish every step', { timeout: 600_000 }, async () => {
    const workers = [denoWorker('deno-a'), denoWorker('deno-b')];
    try {
      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}&token=${JOB.token}`);
      await page.waitForSelector('[data-testid=adapter][data-state=ready]', { timeout: 60_000 });
      await page.waitForSelector('[data-testid=join]:not([disabled])');
      await page.click('[data-testid=join]');
      expect(await waitForTrainingEnd(page, errors, 400_000)).toContain(`Training finished: ${STEPS} steps`);
      const tabRank = Number(await page.getAttribute('[data-testid=participate]', 'data-rank'));
      const codes = await Promise.all(workers.map((w) => w.exit));
      const summaries = workers.map((w) => JSON.parse(w.stdout.trim().split('\n').pop()!) as Summary);
      for (const [i, s] of summaries.entries()) {
        expect(s, workers[i].stderr).toMatchObject({ steps: STEPS, size: 3 });
        expect([0, 3], workers[i].stderr).toContain(codes[i]);
        const other = summaries[1 - i].rank;
        expect(s.links).toEqual(
          expect.arrayContaining([
            { peer: other, transport: 'tcp' },
            { peer: tabRank, transport: 'webrtc' },
          ]),
        );
      }
      expect(summaries[0].weights_crc32).toBe(summaries[1].weights_crc32);
    } finally {
      for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    }
  });
});
