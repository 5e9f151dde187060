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
