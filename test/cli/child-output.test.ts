/**
 * What a person reads from the processes a command starts: prefixed lines
 * without colour codes, a process that could not start named with the
 * system's reason, and a child environment that keeps Vulkan's
 * `XDG_RUNTIME_DIR is invalid` warning away.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { prefixedChildEnv, prefixedLine, spawnFailure, stripAnsi } from '../../src/cli/child-output.node.ts';
import { ensureRuntimeDir } from '../../src/core/runtime-dir.node.ts';

describe('child output', () => {
  it('strips colour codes and links from a prefixed line', () => {
    const coloured =
      '\u001b[32mepoch 1\u001b[39m: loss \u001b[1m0.5\u001b[22m \u001b]8;;http://x\u0007link\u001b]8;;\u0007';
    expect(prefixedLine('[rank 0]', coloured)).toBe('[rank 0] epoch 1: loss 0.5 link\n');
    expect(stripAnsi('plain [32m text')).toBe('plain [32m text');
  });

  it("gives a child no colours and a private runtime dir; launch's lines carry neither colours nor the warning", async () => {
    const env = prefixedChildEnv({ PATH: process.env.PATH, FORCE_COLOR: '3' });
    expect(env.FORCE_COLOR).toBeUndefined();
    expect(env.NO_COLOR).toBe('1');
    const st = statSync(env.XDG_RUNTIME_DIR!);
    expect(st.isDirectory() && (st.mode & 0o077) === 0).toBe(true);
    // A set value is the user's and stays.
    expect(ensureRuntimeDir({ XDG_RUNTIME_DIR: '/run/user/7' })).toBe('/run/user/7');

    // A worker that prints in colour (as a library's logger does when it sees a colour terminal) and says what it got.
    const dir = mkdtempSync(join(tmpdir(), 'ringtrain-child-'));
    const script = join(dir, 'colours.mjs');
    writeFileSync(
      script,
      [
        "console.log('\\u001b[32mgreen\\u001b[39m ' + (process.env.NO_COLOR ?? 'colours on') + ' ' + (process.env.XDG_RUNTIME_DIR ? 'xdg set' : 'xdg unset'));",
        "console.error('\\u001b[31mred\\u001b[39m on stderr');",
      ].join('\n'),
    );
    const parent: NodeJS.ProcessEnv = { ...process.env, FORCE_COLOR: '1' };
    delete parent.XDG_RUNTIME_DIR;
    const r = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, ['bin/ringtrain.js', 'launch', '--np', '1', script], {
        env: parent,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.on('exit', (code) => resolve({ code, out, err }));
    });
    rmSync(dir, { recursive: true, force: true });
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('[worker 0] green 1 xdg set\n');
    expect(r.err).toContain('[worker 0] red on stderr\n');
    expect(r.out + r.err).not.toContain('\u001b[');
  }, 60_000);

  it('names the spawn error of a binary that does not exist', async () => {
    const missing = join(tmpdir(), 'ringtrain-no-such-runtime', 'deno');
    const err = await new Promise<Error & { code?: string }>((resolve) => {
      const child = spawn(missing, ['run', 'x.ts'], { stdio: 'ignore' });
      expect(child.pid).toBeUndefined();
      child.on('error', resolve);
    });
    const line = spawnFailure(missing, err);
    expect(line).toContain(`cannot start ${missing}: no such file (ENOENT)`);
    expect(line).not.toContain('undefined');
  });
});
