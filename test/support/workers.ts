/**
 * Deno workers started by tests: `ringtrain worker --events` under Deno
 * directly (not through `--runtime deno`, whose Node parent would take a
 * SIGKILL meant for the worker), with its JSON event lines parsed as they come.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forEachLine } from '../../src/core/lines.node.ts';

export interface WorkerStep {
  step: number;
  size: number;
  rank: number;
}

export interface TestWorker {
  child: ChildProcess;
  /** Rank announced when it joined. */
  rank?: number;
  steps: WorkerStep[];
  /** 'stall' events (the stall inspector), in order. */
  stalls: { rank: number; name: string; waitingFor: number[]; waitedMs: number; at: number }[];
  /** The `result` event, once training ended. */
  result?: Record<string, unknown> & {
    steps: number;
    size: number;
    stopped_by: { code: string; message: string } | null;
    lost_ranks: number[];
    test_accuracy: number;
  };
  stderr: string;
  /** Every JSON event line, in order. */
  events: (Record<string, unknown> & { event: string })[];
  exit: Promise<number | null>;
}

/** Every worker started here, so a test's afterAll can kill what is left. */
export const startedWorkers: TestWorker[] = [];

let recoveryDir: string | undefined;

/**
 * `--recovery <path>` in a folder of this test process's own (removed when it exits), for a worker
 * started in the repository's root: one that ends with an error writes its recovery checkpoint
 * there, not beside the sources (test/support/repo-root-guard.ts fails a run that leaves one).
 */
export function recoveryArgs(name = 'recovery'): string[] {
  if (recoveryDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'ringtrain-test-recovery-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    recoveryDir = dir;
  }
  return ['--recovery', join(recoveryDir, `${name}.safetensors`)];
}

/** Whether a worker's arguments already say where its recovery checkpoint goes (--save puts it beside the save). */
const namesRecovery = (args: string[]): boolean => args.some((a) => /^--(recovery|save)(=|$)/.test(a));

/** The chaos CLI's entry (chaos/cli.ts): a worker started from it may take `--chaos SPEC`. */
export const CHAOS_ENTRY = 'test/support/chaos/main.ts';

/**
 * `entry`: the CLI's own, or CHAOS_ENTRY for a worker that misbehaves. Unless `extraArgs` say where
 * its recovery checkpoint goes, it goes to a temporary folder (recoveryArgs).
 */
export function startDenoWorker(
  server: string,
  job: { id: string; token: string },
  extraArgs: string[] = [],
  entry = 'src/cli/main.ts',
): TestWorker {
  const child = spawn(
    'node_modules/.bin/deno',
    [
      'run',
      '-A',
      entry,
      'worker',
      '--server',
      server,
      '--job',
      job.id,
      '--token',
      job.token,
      '--events',
      ...extraArgs,
      ...(namesRecovery(extraArgs) ? [] : recoveryArgs()),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const w: TestWorker = {
    child,
    steps: [],
    stalls: [],
    stderr: '',
    events: [],
    exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
  };
  forEachLine(child.stdout!, (line) => {
    if (!line.startsWith('{')) return;
    const m = JSON.parse(line);
    w.events.push(m);
    if (m.event === 'joined') w.rank = m.rank;
    if (m.event === 'step') w.steps.push({ step: m.step, size: m.size, rank: m.rank });
    if (m.event === 'stall') w.stalls.push({ ...m, at: Date.now() });
    if (m.event === 'result') w.result = m;
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
  startedWorkers.push(w);
  return w;
}

export function killStartedWorkers(): void {
  for (const w of startedWorkers.splice(0)) w.child.kill('SIGKILL');
}

/** The worker's latest step event (step 0 in a ring of 0 before the first). */
export function lastStep(w: TestWorker): WorkerStep {
  return w.steps[w.steps.length - 1] ?? { step: 0, size: 0, rank: -1 };
}

/** Polls `pred` every 100 ms; fails naming `what` (and what `state` says was seen) after `timeoutMs`. */
export async function until(pred: () => boolean, what: string, timeoutMs: number, state?: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${state ? `; seen: ${state()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The workers' exit codes once all have exited; fails with what was seen of them after `timeoutMs`. */
export async function exitCodes(workers: TestWorker[], what: string, timeoutMs: number): Promise<(number | null)[]> {
  await until(
    () => workers.every((w) => w.child.exitCode !== null || w.child.signalCode !== null),
    what,
    timeoutMs,
    () => seen(workers),
  );
  return Promise.all(workers.map((w) => w.exit));
}

/** What a timed-out wait saw of these workers: each one's exit code, last steps and stderr tail. */
export function seen(workers: TestWorker[]): string {
  return workers
    .map(
      (w, i) =>
        `\n[worker ${i}] rank ${w.rank} exit ${w.child.exitCode} last steps ${JSON.stringify(w.steps.slice(-3))} stalls ${JSON.stringify(w.stalls.slice(-2))}\n${w.stderr.slice(-1500)}`,
    )
    .join('');
}

/** WebRTC tests must not leak traffic: they run only inside npm test's private network namespace. */
export function requireNetns(): void {
  if (process.env.RINGTRAIN_NETNS !== '1')
    throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
}

/** A process's start time in clock ticks since boot (/proc/PID/stat field 22), or undefined once it is gone. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs a process seen earlier only if it is still that process: pids are reused
 * (pid_max is 32,768 and the suite spawns tens of thousands of threads).
 */
export function killIfSame(p: { pid: number; started: string | undefined }): void {
  if (p.started !== undefined && processStartTime(p.pid) === p.started) process.kill(p.pid, 'SIGKILL');
}
