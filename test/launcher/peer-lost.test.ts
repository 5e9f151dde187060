/**
 * A peer dies mid-run (SIGKILL, no goodbye). The survivors must stop within
 * seconds with an error that names the lost rank, the lowest survivor must
 * save the last completed step, and a new run must resume from that file.
 * Real server, real Deno workers, real WebRTC.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { startServer } from '../../server/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-lost-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

interface Worker {
  child: ChildProcess;
  rank?: number;
  step: number;
  result?: { stopped_by: { code: string; message: string } | null; steps: number; lost_ranks: number[] };
  exit: Promise<number | null>;
  stderr: string;
}

function startWorker(server: string, job: string, token: string, recovery: string): Worker {
  // Deno directly (not through `--runtime deno`, whose Node parent would take the SIGKILL instead).
  const child = spawn('node_modules/.bin/deno', ['run', '-A', 'src/cli/main.ts', 'worker', '--server', server, '--job', job, '--token', token, '--events', '--recovery', recovery], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const w: Worker = { child, step: 0, stderr: '', exit: new Promise((r) => child.on('exit', (code) => r(code))) };
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    partial += d;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const m = JSON.parse(line);
      if (m.event === 'joined') w.rank = m.rank;
      if (m.event === 'step') w.step = m.step;
      if (m.event === 'result') w.result = m;
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
  return w;
}

async function until(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a peer killed mid-run', () => {
  it('stops every survivor with an error naming it, saves the last step, and the run resumes from it', async () => {
    if (process.env.RINGTRAIN_NETNS !== '1') throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
    const job = { id: 'lost', token: 'secret-token', config: { model: 'mlp', optimizer: 'sgd', hyperparameters: { lr: 0.05, momentum: 0.9, seed: 3, epochs: 50 }, batchPerPeer: 16, minPeers: 3, maxPeers: 3 } };
    const server = await startServer({ jobs: [job], staticDir: null });
    const recovery = join(dir, 'recovery.safetensors');
    try {
      const workers = [0, 1, 2].map(() => startWorker(server.url, job.id, job.token, recovery));
      await until(() => workers.every((w) => w.step >= 3), 'three workers to take 3 steps', 90_000);
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
      expect(existsSync(recovery)).toBe(true);
      const saved = decodeCheckpoint(readFileSync(recovery));
      const last = Math.min(...survivors.map((s) => s.result!.steps));
      expect(saved.step).toBe(last);
      expect(saved.step).toBeGreaterThanOrEqual(3);

      // Resume with a fresh launcher (2 workers): training continues from the saved step.
      const resumed = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['bin/ringtrain.js', 'run', '-np', '2', '--model', 'mlp', '--batch', '16', '--resume', recovery, '--steps', String(saved.step + 4), '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
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
  });
});
