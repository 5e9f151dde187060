/**
 * The shipped CLI carries no fault injection nor test-only switches: those
 * live in the chaos entry (test/support/chaos), which reaches the product only
 * through extension points set from code.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.ts';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('the shipped CLI', () => {
  it('has no fault, chaos or adapter-injecting option on any subcommand, hidden ones included', async () => {
    for (const cmd of (await buildProgram()).commands) {
      for (const o of cmd.options) expect(`${cmd.name()} ${o.long}`).not.toMatch(/fault|chaos|assume-adapter/);
    }
  });

  it('reads no test-only environment variable, loads nothing from test/ and has no method meant only for tests', () => {
    for (const file of sources('src')) {
      const text = readFileSync(file, 'utf8');
      expect(text, file).not.toMatch(/RINGTRAIN_ADAPTER|from '[./]*test\/|ForTest(s|ing)\b|FOR TESTS/);
    }
  });

  it('a replaced subcommand must exist', async () => {
    await expect(buildProgram({ nosuch: () => new Command('nosuch') })).rejects.toThrow(/no subcommand named nosuch/);
  });
});
