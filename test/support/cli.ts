/**
 * `ringtrain ARGS` as a user runs it (node bin/ringtrain.js), inside the test's
 * network namespace, with its exit code and whole output.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function ringtrain(args: string[]): Promise<CliRun> {
  if (process.env.RINGTRAIN_NETNS !== '1')
    throw new Error('WebRTC tests must run inside the private network namespace: npm test (scripts/in-netns.sh)');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const started = new Set<ChildProcess>();

/**
 * `ringtrain ARGS` started from `entry` (relative to the repository: the shipped
 * bin/ringtrain.js, or the chaos entry test/support/chaos/bin.js) inside the
 * folder `cwd`, so that the files a run writes (recovery checkpoints) land
 * there. `killRuns()` ends whatever a failed test left running.
 */
export function ringtrainIn(cwd: string, args: string[], entry = 'bin/ringtrain.js'): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(process.cwd(), entry), ...args], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => {
      started.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

export function killRuns(): void {
  for (const c of started) c.kill('SIGKILL');
}

/** Replaces `stream.write` with one that hands what is written to `add` (and calls back at once); returns the undo. */
function captureWrites(stream: NodeJS.WriteStream, add: (text: string) => void): () => void {
  const write = stream.write;
  stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    add(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const callback = rest.find((r): r is () => void => typeof r === 'function');
    if (callback) queueMicrotask(callback);
    return true;
  }) as typeof stream.write;
  return () => (stream.write = write);
}

/**
 * `ringtrain ARGS` in this process, through the same runCli that bin/ringtrain.js calls, with what it writes to
 * stdout and stderr: for what the CLI decides before any GPU, data loop or network (refusals, a read-only predict),
 * without the seconds of CPU a process takes to start. A file keeps one real spawn for the wiring.
 */
export async function ringtrainInProcess(args: string[]): Promise<CliRun> {
  const { runCli } = await import('../../src/cli/program.ts');
  let stdout = '';
  let stderr = '';
  const restore = [
    captureWrites(process.stdout, (t) => (stdout += t)),
    captureWrites(process.stderr, (t) => (stderr += t)),
  ];
  try {
    return { code: await runCli(args), stdout, stderr };
  } finally {
    for (const undo of restore) undo();
  }
}
