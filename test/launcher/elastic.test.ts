/**
 * Elastic training over real WebRTC: two Deno workers train; a third joins
 * mid-run and the ring re-forms to take it in (it starts at the others' step,
 * with their weights); then one worker is killed and the ring re-forms
 * without it; the survivors finish every step.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

interface Worker {
  child: ChildProcess;
  steps: { step: number; size: number; rank: number }[];
  result?: { steps: number; size: number; stopped_by: unknown; test_accuracy: number };
  exit: Promise<number | null>;
  stderr: string;
}

function startWorker(server: string, job: string, token: string): Worker {
  const child = spawn('node_modules/.bin/deno', ['run', '-A', 'src/cli/main.ts', 'worker', '--server', server, '--job', job, '--token', token, '--events'], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const w: Worker = { child, steps: [], stderr: '', exit: new Promise((r) => child.on('exit', (code) => r(code))) };
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    partial += d;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      const m = JSON.parse(line);
      if (m.event === 'step') w.steps.push({ step: m.step, size: m.size, rank: m.rank });
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

const last = (w: Worker) => w.steps[w.steps.length - 1];

describe('elastic training', () => {
  it('takes in a peer that joins mid-run and carries on without one that dies', async () => {
    if (process.env.RINGTRAIN_NETNS !== '1') throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
    const STEPS = 90;
    const job = { id: 'elastic', token: 'elastic-token', config: { model: 'mlp', optimizer: 'sgd', hyperparameters: { lr: 0.05, momentum: 0.9, seed: 5, steps: STEPS, elastic: true }, batchPerPeer: 16, minPeers: 2, maxPeers: 4 } };
    const server = await startServer({ jobs: [job], staticDir: null });
    try {
      const a = startWorker(server.url, job.id, job.token);
      const b = startWorker(server.url, job.id, job.token);
      await until(() => [a, b].every((w) => (last(w)?.step ?? 0) >= 5), 'two workers to take 5 steps', 120_000);

      const c = startWorker(server.url, job.id, job.token);
      await until(() => c.steps.length >= 3, 'the newcomer to take 3 steps', 120_000);
      // The newcomer started where the ring was, in a ring of three.
      expect(c.steps[0].step).toBeGreaterThan(5);
      expect(c.steps[0].size).toBe(3);
      await until(() => [a, b].every((w) => last(w).size === 3), 'the old peers to see a ring of three', 30_000);

      // Kill the peer with rank 1 in the ring of three; the other two re-form and finish.
      const ring3 = [a, b, c];
      const victim = ring3.find((w) => last(w).rank === 1)!;
      const survivors = ring3.filter((w) => w !== victim);
      const stepAtKill = Math.max(...survivors.map((w) => last(w).step));
      victim.child.kill('SIGKILL');
      const codes = await Promise.all(survivors.map((w) => w.exit));
      expect(codes, survivors.map((w) => w.stderr.slice(-2000)).join('\n---\n')).toEqual([0, 0]);
      for (const s of survivors) {
        expect(s.result).toMatchObject({ steps: STEPS, size: 2, stopped_by: null });
        expect(s.steps.some((x) => x.size === 2 && x.step > stepAtKill)).toBe(true);
        expect(s.result!.test_accuracy).toBeGreaterThan(0.5);
      }
    } finally {
      await server.close();
    }
  });
});
