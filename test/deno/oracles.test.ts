/**
 * The same oracle cases under Deno (wgpu + its Vulkan adapter): spawns
 * test/deno/run-oracles.ts with node_modules/.bin/deno and checks every case.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { casesFor, ORACLE_CASES } from '../oracles/cases.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

describe('oracles (deno)', () => {
  it('every kernel matches its CPU oracle under Deno', () => {
    expect(existsSync(deno), `Deno is missing at ${deno}: run npm ci (the 'deno' devDependency ships the binary)`).toBe(
      true,
    );
    const run = spawnSync(deno, ['run', '-A', 'test/deno/run-oracles.ts'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 600_000,
    });
    const line = run.stdout.trim().split('\n').pop() ?? '';
    expect(run.status, `deno exited with ${run.status}: ${run.stderr.slice(-2000)}`).toBe(0);
    const report = JSON.parse(line) as {
      runtime: string;
      adapter: string;
      results: { name: string; ok: boolean; maxAbsErr: number | null; tol: number | null; error?: string }[];
    };
    expect(report.runtime).toBe('deno');
    expect(report.results.map((r) => r.name)).toEqual(casesFor(ORACLE_CASES, 'deno').map((c) => c.name));
    const failed = report.results.filter((r) => !r.ok);
    expect(failed, `failed under Deno (${report.adapter}): ${JSON.stringify(failed, null, 1)}`).toEqual([]);
  });
});
