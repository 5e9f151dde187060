/**
 * `ringtrain run` with --tls-cert/--tls-key: its server speaks https/wss, its
 * Deno worker trusts the certificate and gets the job's token through its
 * environment. While it runs, the token (read from the worker's environment)
 * is in no process's argv on this machine.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTestCert } from './test-cert.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const cert = makeTestCert();
afterAll(() => cert.dispose());

function readProc(pid: string, file: string): string {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return ''; // gone, or not ours to read
  }
}

/** The children of `parent` (by /proc/<pid>/stat's ppid field). */
function childrenOf(parent: number): string[] {
  return readdirSync('/proc').filter(
    (p) =>
      /^\d+$/.test(p) &&
      readProc(p, 'stat')
        .replace(/^.*\) /, '')
        .split(' ')[1] === String(parent),
  );
}

describe('ringtrain run over TLS, the token by environment', () => {
  it('trains with wss signaling; the token is in no argv', { timeout: 300_000 }, async () => {
    if (process.env.RINGTRAIN_NETNS !== '1')
      throw new Error('WebRTC tests must run inside the private network namespace: npm test (scripts/in-netns.sh)');
    const env = { ...process.env };
    delete env.RINGTRAIN_TOKEN;
    const run = spawn(
      process.execPath,
      [
        'bin/ringtrain.js',
        'run',
        '-np',
        '1',
        '--model',
        'mlp',
        '--steps',
        '3',
        '--batch',
        '32',
        '--json',
        '--tls-cert',
        cert.certPath,
        '--tls-key',
        cert.keyPath,
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env,
      },
    );
    let stdout = '';
    let stderr = '';
    run.stdout.on('data', (d) => (stdout += String(d)));
    run.stderr.on('data', (d) => (stderr += String(d)));
    const exit = new Promise<number | null>((resolve) => run.on('exit', (code) => resolve(code)));
    let exited = false;
    void exit.then(() => (exited = true));

    // Find the worker and its token while the run goes on (poll with a deadline, then look).
    let token: string | undefined;
    const deadline = Date.now() + 120_000;
    while (!token && !exited && Date.now() < deadline) {
      for (const pid of childrenOf(run.pid!)) {
        const found = readProc(pid, 'environ')
          .split('\0')
          .find((kv) => kv.startsWith('RINGTRAIN_TOKEN='));
        if (found) token = found.slice('RINGTRAIN_TOKEN='.length);
      }
      if (!token) await new Promise((r) => setTimeout(r, 50));
    }
    expect(token, `no worker with RINGTRAIN_TOKEN in its environment\n${stderr}`).toMatch(/^[0-9a-f]{32}$/);
    const argvWithToken = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => readProc(p, 'cmdline').includes(token!));
    expect(argvWithToken).toEqual([]);

    expect(await exit, stderr).toBe(0);
    const result = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ steps: 3, size: 1, ok: true });
    expect(stderr).toMatch(/on https:\/\/127\.0\.0\.1:\d+/);
    expect(stderr + stdout).not.toContain(token!);
  });
});
