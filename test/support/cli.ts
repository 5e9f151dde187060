/**
 * `ringtrain ARGS` as a user runs it (node bin/ringtrain.js), inside the test's
 * network namespace, with its exit code and whole output.
 */
import { spawn } from 'node:child_process';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function ringtrain(args: string[]): Promise<CliRun> {
  if (process.env.RINGTRAIN_NETNS !== '1') throw new Error('WebRTC tests must run inside the private network namespace: npm test (scripts/in-netns.sh)');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
