/**
 * `ringtrain run --discover SCRIPT`, Horovod's host-discovery contract: the
 * script cats a file the test rewrites. The run starts with the 2 workers the
 * script offers, grows to 4 when it offers 4, shrinks to 3 when it offers 3,
 * and finishes every step with the 3 that are left. Real launcher, real ws
 * server, real Deno workers over real WebRTC (inside the test's namespace).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { killIfSame, processStartTime, requireNetns, until } from '../support/workers.ts';

// Enough steps that the run is still going when the script has grown it twice and shrunk it once.
const STEPS = 200;
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-discover-'));
let launcher: ChildProcess | undefined;
/** The workers the launcher named, with their start times (a pid may be reused by the time afterAll runs). */
const workers: { pid: number; started: string | undefined }[] = [];
afterAll(() => {
  // The launcher leads its own process group: while it has not exited (so its pid is still ours),
  // one kill reaches the workers discovery started too.
  if (launcher?.pid !== undefined && launcher.exitCode === null && launcher.signalCode === null)
    process.kill(-launcher.pid, 'SIGKILL');
  for (const w of workers) killIfSame(w);
  rmSync(dir, { recursive: true, force: true });
});

/** Replaces the hosts file in one step, so the script never reads a half-written answer. */
function offer(hosts: string, text: string): void {
  writeFileSync(`${hosts}.next`, text);
  renameSync(`${hosts}.next`, hosts);
}

/** `re-formed with N peers` lines, in order. */
function ringSizes(stderr: string): number[] {
  return [...stderr.matchAll(/the ring re-formed with (\d+) peers/g)].map((m) => Number(m[1]));
}

describe('ringtrain run --discover', () => {
  it('grows from 2 to 4 workers and shrinks to 3 as the script answers, and finishes', async () => {
    requireNetns();
    const hosts = join(dir, 'hosts');
    const script = join(dir, 'discover.sh');
    writeFileSync(hosts, 'localhost:2\n');
    writeFileSync(script, `#!/bin/sh\ncat '${hosts}'\n`);
    chmodSync(script, 0o755);
    const args = [
      'run',
      '--discover',
      script,
      '--discover-interval',
      '0.5',
      '--min-np',
      '2',
      '--max-np',
      '4',
      '--runtime',
      'deno',
      '--model',
      'mlp',
      '--steps',
      String(STEPS),
      '--batch',
      '32',
      '--seed',
      '7',
      '--json',
    ];
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    launcher = child;
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      for (const m of String(d).matchAll(/\(pid (\d+)\)/g))
        workers.push({ pid: Number(m[1]), started: processStartTime(Number(m[1])) });
    });
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    await until(() => stderr.includes('ring of 2:'), 'the first ring of the 2 discovered workers', 120_000);
    // One slot at a time, as hosts come up: 3, then 4.
    offer(hosts, 'localhost:3\n');
    await until(() => ringSizes(stderr).includes(3), 'the ring to grow to 3', 120_000);
    offer(hosts, 'localhost:1\nlocalhost:3\n');
    await until(() => ringSizes(stderr).includes(4), 'the ring to grow to 4', 120_000);
    const grownAt = ringSizes(stderr).lastIndexOf(4);
    offer(hosts, '# one slot fewer\nlocalhost:3\n');
    await until(
      () =>
        ringSizes(stderr)
          .slice(grownAt + 1)
          .includes(3),
      'the ring to shrink to 3',
      120_000,
    );

    const code = await exit;
    expect(code, stderr).toBe(0);
    // The worker counts, not the slot counts: one CI run logged '6 slots, 4 workers (was 3)' for the
    // 1 + 3 offer (the file was then rewritten in place; it is now replaced whole), and --max-np 4
    // clamped it as it should.
    expect(stderr).toMatch(/discovery: 3 slots, 3 workers \(was 2\)/);
    expect(stderr).toMatch(/discovery: \d+ slots, 4 workers \(was 3\)/);
    expect(stderr).toMatch(/discovery: 3 slots, 3 workers \(was 4\)/);
    // The shrink stopped one worker; the ring was 3 right after it. (Exactly one departure is not
    // asserted: under load a joining pair's data channel sometimes fails to open within 30 s and
    // one more worker leaves; discovery then starts another, an open bug of ring formation.)
    expect(ringSizes(stderr).slice(grownAt + 1)[0]).toBe(3);
    const summary = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(summary, stderr).toMatchObject({ steps: STEPS, size: 3, ok: true, stopped_by: null });
    expect(summary.workers_started).toBeGreaterThanOrEqual(4);
    expect(summary.retired_workers.length).toBeGreaterThanOrEqual(1);
    // A sanity bound: 200 steps of the MLP learn the digits whatever the ring's size.
    expect(summary.test_accuracy).toBeGreaterThan(0.8);
  }, 300_000);
});
