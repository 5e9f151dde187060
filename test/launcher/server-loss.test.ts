/**
 * An elastic job loses its signaling server mid-run. The ring does not need
 * the server between membership changes, so it trains on; the workers try to
 * reconnect for the job's `serverWaitMs`. If the server comes back they re-join
 * it and finish; if not, they stop with ERR_SIGNALING and save the last step
 * they completed, in new files. Real server, real Deno workers, real WebRTC.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { startServer } from '../../server/index.ts';
import { killStartedWorkers, lastStep, requireNetns, startDenoWorker, until } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-server-loss-'));
afterAll(() => {
  killStartedWorkers();
  rmSync(dir, { recursive: true, force: true });
});

const jobWith = (id: string, steps: number, serverWaitMs: number) => ({
  id,
  token: `${id}-token`,
  config: {
    model: 'mlp',
    optimizer: 'sgd',
    hyperparameters: { lr: 0.05, momentum: 0.9, seed: 4, steps, elastic: true, serverWaitMs },
    batchPerPeer: 16,
    minPeers: 2,
    maxPeers: 2,
  },
});

describe('an elastic job that loses its signaling server', () => {
  it('trains on without it, then stops with ERR_SIGNALING and saves the last completed step when it does not come back', async () => {
    requireNetns();
    // Long enough that a starved machine still takes a step in it (8 s once saw none under a full suite).
    const job = jobWith('gone', 100_000, 15_000);
    const server = await startServer({ jobs: [job], staticDir: null });
    const recovery = join(dir, 'gone.safetensors');
    const workers = [0, 1].map(() => startDenoWorker(server.url, job, ['--recovery', recovery]));
    try {
      await until(() => workers.every((w) => lastStep(w).step >= 3), 'two workers to take 3 steps', 120_000);
    } finally {
      await server.close();
    }
    const stepAtLoss = Math.max(...workers.map((w) => lastStep(w).step));
    const codes = await Promise.all(workers.map((w) => w.exit));
    expect(codes, workers.map((w) => w.stderr.slice(-1500)).join('\n---\n')).toEqual([3, 3]);
    for (const w of workers) {
      // It went on training without the server...
      expect(lastStep(w).step).toBeGreaterThan(stepAtLoss);
      expect(w.stderr).toContain('training goes on with the current 2 peers while reconnecting for up to 15 s');
      // ...then stopped, saying why, with its last completed step in a new file.
      expect(w.result?.stopped_by?.code).toBe('ERR_SIGNALING');
      expect(w.result?.stopped_by?.message).toMatch(/did not come back within 15 s/);
      const path = String(w.result!.recovery);
      expect(path).toBe(join(dir, `gone-step${w.result!.steps}.safetensors`));
      expect(decodeCheckpoint(readFileSync(path)).step).toBe(w.result!.steps);
    }
  }, 300_000);

  it('re-joins the server when it comes back within the wait and finishes every step', async () => {
    requireNetns();
    const STEPS = 40;
    const job = jobWith('back', STEPS, 60_000);
    const first = await startServer({ jobs: [job], staticDir: null });
    const workers = [0, 1].map(() => startDenoWorker(first.url, job));
    let second: Awaited<ReturnType<typeof startServer>> | undefined;
    try {
      await until(() => workers.every((w) => lastStep(w).step >= 3), 'two workers to take 3 steps', 120_000);
      await first.close();
      await until(
        () => workers.every((w) => w.stderr.includes('lost the signaling server')),
        'both workers to notice the server is gone',
        30_000,
      );
      const stepAtLoss = Math.max(...workers.map((w) => lastStep(w).step));
      // The same address, a fresh server (its epochs start again at 1).
      second = await startServer({ jobs: [job], staticDir: null, port: first.port });
      const codes = await Promise.all(workers.map((w) => w.exit));
      expect(codes, workers.map((w) => w.stderr.slice(-1500)).join('\n---\n')).toEqual([0, 0]);
      for (const w of workers) {
        expect(w.stderr).toContain('reconnected to the signaling server');
        expect(w.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
        expect(w.steps.some((s) => s.step > stepAtLoss && s.size === 2)).toBe(true);
      }
      expect(second.jobInfo('back')?.epoch).toBeGreaterThanOrEqual(2);
    } finally {
      await second?.close();
    }
  }, 300_000);
});
