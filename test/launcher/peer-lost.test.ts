/**
 * A peer dies mid-run (SIGKILL, no goodbye). The survivors must stop within
 * seconds with an error that names the lost rank, every survivor must save
 * the last step it completed in a new file named after that step, and a new
 * run must resume from it.
 * Real server, real Deno workers, real WebRTC.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { startServer } from '../../server/index.ts';
import { killStartedWorkers, lastStep, requireNetns, startDenoWorker, until } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-lost-'));
const children: ChildProcess[] = [];
afterAll(() => {
  killStartedWorkers();
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('a peer killed mid-run', () => {
  it('stops every survivor with an error naming it, saves the last completed step in a new file, and the run resumes from it', async () => {
    requireNetns();
    const job = {
      id: 'lost',
      token: 'secret-token',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, momentum: 0.9, seed: 3, epochs: 50 },
        batchPerPeer: 16,
        minPeers: 3,
        maxPeers: 3,
      },
    };
    const server = await startServer({ jobs: [job], staticDir: null });
    const recoveryBase = join(dir, 'recovery.safetensors');
    try {
      const workers = [0, 1, 2].map(() => startDenoWorker(server.url, job, ['--recovery', recoveryBase]));
      await until(() => workers.every((w) => lastStep(w).step >= 3), 'three workers to take 3 steps', 90_000);
      const victim = workers.find((w) => w.rank === 2)!;
      victim.child.kill('SIGKILL');
      const killedAt = Date.now();
      const survivors = workers.filter((w) => w !== victim);
      const codes = await Promise.all(survivors.map((w) => w.exit));
      expect(Date.now() - killedAt).toBeLessThan(30_000);
      expect(codes).toEqual([3, 3]);
      for (const s of survivors) {
        expect(s.result?.stopped_by?.code, s.stderr).toMatch(/ERR_PEER_LOST|ERR_ABORTED/);
        expect(s.result?.stopped_by?.message).toMatch(/rank 2/);
      }
      // Each survivor names the file that holds its last completed step: <base>-step<N>.safetensors.
      for (const s of survivors) {
        const path = String(s.result!.recovery);
        expect(path).toBe(join(dir, `recovery-step${s.result!.steps}.safetensors`));
        expect(decodeCheckpoint(readFileSync(path)).step).toBe(s.result!.steps);
      }
      expect(existsSync(recoveryBase)).toBe(false);
      const recovery = String(survivors[0].result!.recovery);
      const saved = decodeCheckpoint(readFileSync(recovery));
      expect(saved.step).toBeGreaterThanOrEqual(3);

      // Resume with a fresh launcher (2 workers): training continues from the saved step.
      const resumed = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(
          process.execPath,
          [
            'bin/ringtrain.js',
            'run',
            '-np',
            '2',
            '--model',
            'mlp',
            '--batch',
            '16',
            '--resume',
            recovery,
            '--steps',
            String(saved.step + 4),
            '--json',
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        children.push(child);
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d) => (stdout += d));
        child.stderr.on('data', (d) => (stderr += d));
        child.on('exit', (code) => resolve({ code, stdout, stderr }));
      });
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!).steps).toBe(saved.step + 4);
    } finally {
      await server.close();
    }
  }, 400_000);
});
