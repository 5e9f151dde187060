/** `ringtrain --version` (and -V) prints the package's version and exits 0. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

describe('ringtrain --version', () => {
  it('prints the version in package.json', { timeout: 60_000 }, () => {
    for (const flag of ['--version', '-V']) {
      const r = spawnSync(process.execPath, ['bin/ringtrain.js', flag], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${version}\n`);
    }
  });
});
