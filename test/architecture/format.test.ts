import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const prettier = path.join(root, 'node_modules/prettier/bin/prettier.cjs');
// Every folder of TypeScript and JavaScript the project writes (.prettierignore keeps data and docs out).
const FOLDERS = ['src', 'server', 'demo', 'test', 'bench', 'scripts', 'bin', 'examples'];

function check(paths: string[]): { ok: boolean; output: string } {
  try {
    execFileSync(process.execPath, [prettier, '--check', '--log-level', 'warn', ...paths], {
      cwd: root,
      encoding: 'utf8',
      stdio: 'pipe',
    });
    return { ok: true, output: '' };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('the formatter (prettier, .prettierrc.json: lines of 120)', () => {
  it('finds every source file formatted (run `npx prettier --write .` to fix)', () => {
    const { ok, output } = check(FOLDERS);
    expect(output, output).toBe('');
    expect(ok).toBe(true);
  }, 120_000);

  it('fails on a file it would change', () => {
    const bad = path.join(root, 'test/architecture/fixtures/unformatted.ts.txt');
    const { ok, output } = check(['--parser', 'typescript', bad]);
    expect(ok).toBe(false);
    expect(output).toContain('unformatted.ts.txt');
  });
});
