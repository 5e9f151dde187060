/**
 * `ringtrain launch` prefixes a worker's lines with its rank once the ring
 * gave it one (`[rank R]`), with the launcher's own number for it before
 * (`[worker I]`), and says which worker holds which rank. The script joins
 * with `await init()` from 'ringtrain' and no arguments: the launcher's
 * environment names the server, the job, the token and the worker. With
 * --tabs, an argument naming a file here (a data set the tabs could never
 * read) is refused before anything starts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-launch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ringtrain launch', () => {
  it(
    'prefixes each worker’s lines with its rank once it has one, and with its worker number before',
    { timeout: 120_000 },
    async () => {
      const run = await ringtrain(['launch', '-np', '2', 'test/launcher/rank-script.ts']);
      expect(run.code, run.stderr).toBe(0);
      const out = run.stdout.split('\n');
      // Before init(): no rank yet, so the launcher's number, said as such.
      expect(out.filter((l) => l.endsWith(' starting')).sort()).toEqual(['[worker 0] starting', '[worker 1] starting']);
      // After: each rank's own words agree with the prefix, on stdout and stderr.
      const held = out.map((l) => /^\[rank (\d)\] I hold rank (\d) of 2$/.exec(l)).filter((m) => m !== null);
      expect(held.map((m) => m[1]).sort()).toEqual(['0', '1']);
      for (const m of held) expect(m[2]).toBe(m[1]);
      expect(
        run.stderr
          .split('\n')
          .filter((l) => / on stderr$/.test(l))
          .sort(),
      ).toEqual(['[rank 0] rank 0 on stderr', '[rank 1] rank 1 on stderr']);
      // Which worker (and process) holds which rank, one line each.
      const pids = new Map(
        out
          .map((l) => /^\[launch\] worker (\d): pid (\d+)$/.exec(l))
          .filter((m) => m !== null)
          .map((m) => [m[1], m[2]]),
      );
      const holds = out
        .map((l) => /^\[launch\] worker (\d) \(pid (\d+)\) is rank (\d)$/.exec(l))
        .filter((m) => m !== null);
      expect(holds.map((m) => m[3]).sort()).toEqual(['0', '1']);
      for (const m of holds) expect(pids.get(m[1])).toBe(m[2]);
    },
  );

  it('with --tabs, refuses a script argument that names a file on this machine', async () => {
    writeFileSync(join(dir, 'rows.csv'), 'a,label\n1,0\n');
    const run = await ringtrain([
      'launch',
      '-np',
      '1',
      '--tabs',
      '1',
      '--static',
      dir,
      'test/launcher/rank-script.ts',
      `--data=${join(dir, 'rows.csv')}`,
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `launch --tabs: the script's argument --data=${join(dir, 'rows.csv')} names a file on this machine, which a browser tab cannot read`,
    );
    expect(run.stdout).not.toContain('[launch] worker');
  });
});
