import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const prettier = path.join(root, 'node_modules/prettier/bin/prettier.cjs');
// Every folder of TypeScript and JavaScript the project writes (.prettierignore keeps data and docs out).
const FOLDERS = ['src', 'server', 'demo', 'test', 'bench', 'scripts', 'bin', 'examples'];
// Prettier's own cache, by content: a file is parsed again unless prettier found it formatted before with the same
// content and the same options (prettier's and Node's versions among them); it records no entry for a file it would
// change. Parsing the tree's 770 files is this test's whole cost, and most of them are the same from run to run.
// One cache per checkout, outside it (node_modules may be shared between checkouts).
const CACHE = path.join(
  tmpdir(),
  `ringtrain-prettier-cache-${createHash('sha256').update(root).digest('hex').slice(0, 16)}.json`,
);
const scratch = mkdtempSync(path.join(tmpdir(), 'ringtrain-format-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function check(paths: string[], cache = CACHE): { ok: boolean; output: string } {
  try {
    execFileSync(
      process.execPath,
      [
        prettier,
        '--check',
        '--log-level',
        'warn',
        '--cache',
        '--cache-strategy',
        'content',
        '--cache-location',
        cache,
      ].concat(paths),
      { cwd: root, encoding: 'utf8', stdio: 'pipe' },
    );
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

  it('checks a file again once its content changes, though the cache holds it as formatted', () => {
    const file = path.join(scratch, 'edited.ts');
    const cache = path.join(scratch, 'cache.json');
    writeFileSync(file, 'export const x = { a: 1, b: 2 };\n');
    expect(check([file], cache)).toEqual({ ok: true, output: '' });
    // The same length and the same modification second: only the content tells the two apart.
    writeFileSync(file, 'export const x = {a: 1, b: 2  };\n');
    const { ok, output } = check([file], cache);
    expect(ok).toBe(false);
    expect(output).toContain('edited.ts');
  });
});
