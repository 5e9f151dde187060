/**
 * `ringtrain run -np 3 --elastic` as a user runs it, with one worker process
 * SIGKILLed mid-run: once the process holding rank 0, once another one. The
 * survivors re-form the ring and finish every step; the launcher exits 0 and
 * names who left. Real launcher, real ws server, real Deno workers over real
 * TCP links (inside the test's network namespace).
 *
 * An elastic run's global batch is fixed (-np x --batch), so the survivors take
 * the same steps the unbroken ring would: the two runs, which lost different
 * ranks at different steps, end at the same accuracy (the bar is within
 * 0.5 points of an unbroken run; bench/elastic-recovery.ts measures that gap).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { killIfSame, processStartTime, requireNetns, until } from '../support/workers.ts';

const STEPS = 60;
/** Each run's final test accuracy, by the rank that was killed. */
const accuracyAfterLosing = new Map<number, number>();
const launchers: ChildProcess[] = [];
const workers: { pid: number; started: string | undefined }[] = [];
afterAll(() => {
  for (const c of launchers) c.kill('SIGKILL');
  for (const w of workers) killIfSame(w);
});

interface Launch {
  stdout: string;
  stderr: string;
  exit: Promise<number | null>;
}

function launch(args: string[]): Launch {
  const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  launchers.push(child);
  const l: Launch = {
    stdout: '',
    stderr: '',
    exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
  };
  child.stdout.on('data', (d) => (l.stdout += d));
  child.stderr.on('data', (d) => (l.stderr += d));
  return l;
}

/** The launcher's `ring of 3: rank 0 deno-1 (pid 123), …` line, as rank → {name, pid}. */
function ringOf(text: string): Map<number, { name: string; pid: number }> | undefined {
  const line = text.split('\n').find((l) => l.includes('ring of 3:'));
  if (!line) return undefined;
  const ranks = new Map<number, { name: string; pid: number }>();
  for (const m of line.matchAll(/rank (\d+) (\S+) \(pid (\d+)\)/g))
    ranks.set(Number(m[1]), { name: m[2], pid: Number(m[3]) });
  return ranks;
}

/** The highest step the launcher's progress lines reported. */
function progress(text: string): number {
  return Math.max(0, ...[...text.matchAll(/^step (\d+)\//gm)].map((m) => Number(m[1])));
}

describe('ringtrain run -np 3 --elastic: a worker SIGKILLed mid-run', () => {
  for (const victimRank of [0, 2]) {
    it(`the survivors re-form without rank ${victimRank}, finish every step, and the launcher names who left`, async () => {
      requireNetns();
      const run = launch([
        'run',
        '-np',
        '3',
        '--elastic',
        '--model',
        'mlp',
        '--steps',
        String(STEPS),
        '--batch',
        '32',
        '--seed',
        '7',
        '--json',
      ]);
      await until(() => ringOf(run.stderr)?.size === 3, 'the launcher to name the ring', 120_000);
      const ring = ringOf(run.stderr)!;
      workers.push(...[...ring.values()].map((r) => ({ pid: r.pid, started: processStartTime(r.pid) })));
      await until(() => progress(run.stderr) >= 12, 'the ring to take 12 steps', 180_000);
      const victim = ring.get(victimRank)!;
      process.kill(victim.pid, 'SIGKILL');

      const code = await run.exit;
      expect(code, run.stderr).toBe(0);
      // One line names the worker that left and why (its socket closed without a goodbye).
      const left = run.stderr.split('\n').filter((l) => l.includes('left the job'));
      expect(left, run.stderr).toHaveLength(1);
      expect(left[0]).toContain(`${victim.name} (rank ${victimRank}) left the job (disconnected)`);
      const reformed = run.stderr.match(/the ring re-formed with 2 peers at step (\d+), ([\d.]+) s after/);
      expect(reformed, run.stderr).not.toBeNull();
      expect(Number(reformed![1])).toBeGreaterThanOrEqual(12);
      expect(Number(reformed![1])).toBeLessThan(STEPS);
      // Issue 13's bound, read from the launcher's own report (from the departure to the first
      // step of the smaller ring; 0.2-0.8 s were seen on a loaded 2-core machine).
      expect(Number(reformed![2])).toBeLessThan(10);

      const summary = JSON.parse(run.stdout.trim().split('\n').pop()!);
      accuracyAfterLosing.set(victimRank, summary.test_accuracy);
      expect(summary.global_batch).toBe(3 * 32);
      expect(summary).toMatchObject({
        steps: STEPS,
        size: 2,
        ok: true,
        stopped_by: null,
        lost_workers: [Number(victim.name.split('-')[1])],
      });
      // The workers link by TCP (run's default between native workers), and the re-formed ring did too.
      expect(
        summary.links_by_rank.map((r: { links: { transport: string }[] }) => r.links.map((l) => l.transport)),
      ).toEqual([['tcp'], ['tcp']]);
      // A sanity bound: 60 steps of the MLP on a ring that lost a third of its batch still learn.
      expect(summary.test_accuracy).toBeGreaterThan(0.8);
    }, 400_000);
  }

  it('losing rank 0 or rank 2 costs the same: both runs end within 0.5 points of each other', () => {
    const [a, b] = [accuracyAfterLosing.get(0), accuracyAfterLosing.get(2)];
    expect(a, 'the run that lost rank 0 did not finish').toBeTypeOf('number');
    expect(b, 'the run that lost rank 2 did not finish').toBeTypeOf('number');
    expect(Math.abs(a! - b!) * 100).toBeLessThanOrEqual(0.5);
  });
});
