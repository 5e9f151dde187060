/**
 * `npm start` builds the page first (`vite build demo --logLevel warn`): that
 * build prints nothing, so a warning a person sees there is new and worth
 * reading (it was two "Module "events" has been externalized" lines, from
 * simple-peer's Node build, before the page took its browser bundle alone).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('the page build', () => {
  it('prints no warning', () => {
    const out = mkdtempSync(join(tmpdir(), 'ringtrain-page-build-'));
    try {
      const r = spawnSync(
        process.execPath,
        ['node_modules/vite/bin/vite.js', 'build', 'demo', '--logLevel', 'warn', '--outDir', out, '--emptyOutDir'],
        { encoding: 'utf8' },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(`${r.stdout}${r.stderr}`.trim()).toBe('');
      // It built the page, with simple-peer's browser bundle and nothing of its Node build.
      const assets = readdirSync(join(out, 'assets'));
      expect(assets.some((f) => f.startsWith('simplepeer.min'))).toBe(true);
      expect(assets.some((f) => f.startsWith('index') && f.endsWith('.js'))).toBe(true);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
