/**
 * The public entry point, `import … from 'ringtrain'` (package.json `exports`,
 * resolved by the package's own name): a tiny model trains a few steps through
 * it alone, under Node (here) and under Deno (api-run.ts run by `deno run -A`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type ApiRun, runApi } from './api-run.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

function expectTrained(r: ApiRun): void {
  expect(r.lastLoss).toBeLessThan(r.firstLoss * 0.6);
  expect(r.accuracy).toBeGreaterThan(0.8);
  // Eval mode: no dropout mask, so two evaluations agree exactly.
  expect(r.evalLosses[1]).toBe(r.evalLosses[0]);
  expect(r.predictedClasses).toHaveLength(5);
  expect(r.reloadedEqual).toBe(true);
  expect(r.allreduced).toEqual([1.5, 10]);
  expect(r.replicasEqual).toBe(true);
}

describe("import … from 'ringtrain'", () => {
  it('trains, evaluates, predicts, saves and loads, and averages over a ring, under Node', async () => {
    const r = await runApi();
    expect(r.runtime).toBe('node');
    expectTrained(r);
  });

  it('does the same under Deno', () => {
    expect(existsSync(deno), `Deno is missing at ${deno}: run npm ci`).toBe(true);
    const run = spawnSync(deno, ['run', '-A', 'test/library/api-run.ts'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 300_000,
    });
    expect(run.status, `deno exited with ${run.status}: ${run.stderr.slice(-2000)}`).toBe(0);
    const r = JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as ApiRun;
    expect(r.runtime).toBe('deno');
    expectTrained(r);
  });
});
