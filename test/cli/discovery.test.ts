/**
 * The host-discovery contract of `ringtrain run --discover` (Horovod's): the
 * script's `host[:slots]` lines, the local-only rule, the clamp to
 * --min-np/--max-np, which workers a shrink stops, and the errors a person
 * gets for a script that cannot run or says something else. The loop itself
 * runs in test/launcher/discover.test.ts with real workers.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  clampWorkers,
  discoverOptions,
  discoverSlots,
  keepWorkersDiscovered,
  localSlots,
  parseHostList,
  workersToStop,
  type ScaledWorker,
} from '../../src/cli/launcher/discovery.node.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { runCommand } from '../../src/cli/commands/run.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-discovery-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string, mode = 0o755): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, mode);
  return path;
}

describe('discovery script output', () => {
  it('reads host[:slots] lines, slots defaulting to 1, skipping blanks and comments', () => {
    expect(parseHostList('localhost:2\n\n# spare\nnode-1\nnode-2.example:8\n')).toEqual([
      { host: 'localhost', slots: 2 },
      { host: 'node-1', slots: 1 },
      { host: 'node-2.example', slots: 8 },
    ]);
    expect(parseHostList('')).toEqual([]);
  });

  it('refuses a malformed line, naming it', () => {
    for (const bad of ['localhost:0', 'localhost:two', 'a b', 'localhost:-1', ':3']) {
      expect(() => parseHostList(`localhost\n${bad}\n`), bad).toThrow(/line 2: expected host or host:slots/);
    }
  });

  it('sums the slots of this machine and refuses another host', () => {
    expect(localSlots(parseHostList('localhost:2\n127.0.0.1\nbox:3\n'), 'box')).toBe(6);
    expect(localSlots(parseHostList('box:3\n'), 'box.cluster.local')).toBe(3);
    expect(() => localSlots(parseHostList('localhost\nworker-7:4\n'), 'box')).toThrow(
      /host "worker-7".*this machine only/,
    );
  });

  it('keeps the workers between --min-np and --max-np', () => {
    expect([0, 1, 2, 3, 4, 9].map((n) => clampWorkers(n, 2, 4))).toEqual([2, 2, 2, 3, 4, 4]);
  });
});

describe('which workers a shrink stops', () => {
  const w = (training: boolean, rank?: number, exited = false): ScaledWorker => ({ training, rank, exited });
  it('first those still starting, then the newest, rank 0 last, and never the gone', () => {
    const ws = [w(true, 0), w(true, 1), w(false), w(true, 2), w(true, 3, true)];
    expect(workersToStop(ws, 4)).toEqual([]);
    expect(workersToStop(ws, 3)).toEqual([ws[2]]);
    expect(workersToStop(ws, 2)).toEqual([ws[2], ws[3]]);
    expect(workersToStop(ws, 1)).toEqual([ws[2], ws[3], ws[1]]);
    // Rank 0 is the newest here, and still goes last.
    const newestIsRank0 = [w(true, 1), w(true, 0)];
    expect(workersToStop(newestIsRank0, 1)).toEqual([newestIsRank0[0]]);
    // A worker already retired counts as gone.
    expect(workersToStop([w(true, 0), { ...w(true, 1), retired: true }, w(true, 2)], 2)).toEqual([]);
  });
});

describe('running the script', () => {
  it('returns the slots it offers', async () => {
    await expect(discoverSlots(script('ok.sh', "printf 'localhost:2\\nlocalhost\\n'"))).resolves.toBe(3);
  });

  it('says what is wrong with a script that cannot run or fails', async () => {
    await expect(discoverSlots(join(dir, 'missing.sh'))).rejects.toThrow(/missing.sh: no such file/);
    await expect(discoverSlots(script('noexec.sh', 'echo localhost', 0o644))).rejects.toThrow(
      /not executable \(chmod \+x it\)/,
    );
    await expect(discoverSlots(script('fails.sh', 'echo "cannot list pods" >&2; exit 3'))).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringMatching(/it failed \(cannot list pods\)/),
    });
  });

  it('makes the run elastic and sizes -np from the first answer', async () => {
    const s = script('four.sh', 'echo localhost:4');
    await expect(discoverOptions({ discover: s, maxNp: '3' })).resolves.toEqual({
      elastic: true,
      np: 3,
      minNp: 1,
      maxNp: 3,
      discoverIntervalMs: 3000,
    });
    await expect(discoverOptions({ discover: s, minNp: '2', discoverInterval: '0.5' })).resolves.toMatchObject({
      np: 4,
      minNp: 2,
      maxNp: 64,
      discoverIntervalMs: 500,
    });
    await expect(discoverOptions({ discover: s, discoverInterval: '0' })).rejects.toThrow(
      /--discover-interval must be seconds from 0.1/,
    );
    await expect(discoverOptions({ discover: s, minNp: '3', maxNp: '2' })).rejects.toThrow(
      /--max-np must be a whole number from 3/,
    );
  });

  it('ringtrain run without -np or --discover says it needs one', async () => {
    await expect(runCommand().exitOverride().parseAsync(['--steps', '1'], { from: 'user' })).rejects.toThrow(
      /needs -np N .*or --discover SCRIPT/,
    );
  });
});

describe('the discovery loop', () => {
  it('follows the answers between --min-np and --max-np, keeps the workers through a failed poll, and stops when told', async () => {
    const hosts = join(dir, 'loop-hosts');
    const s = script('loop.sh', `cat '${hosts}'`);
    // The answers, one per poll: the loop waits on `next` instead of a timer.
    const answers = [
      'localhost:4',
      'localhost:9',
      'localhost:3',
      'not a host line',
      'localhost\nlocalhost',
      'localhost:0x',
      'localhost:1',
    ];
    const workers: ScaledWorker[] = [
      { training: true, rank: 0, exited: false },
      { training: true, rank: 1, exited: false },
    ];
    const said: string[] = [];
    const sizes: number[] = [];
    let polls = 0;
    await keepWorkersDiscovered(
      {
        script: s,
        intervalMs: 0,
        minNp: 2,
        maxNp: 5,
        workers: () => workers,
        start: () => void workers.push({ training: false, exited: false }),
        stop: (w) => void (w.exited = true),
        over: () => polls > answers.length,
        say: (line) => void said.push(line),
      },
      async () => {
        if (polls > 0) sizes.push(workers.filter((w) => !w.exited && !w.retired).length);
        if (polls < answers.length) writeFileSync(hosts, `${answers[polls]}\n`);
        polls++;
      },
    );
    // 4; 9 clamped to 5; 3; a bad answer keeps 3; 2; the next bad answer keeps 2; 1 clamped to 2.
    expect(sizes).toEqual([4, 5, 3, 3, 2, 2, 2]);
    expect(said.filter((l) => l.includes('expected host or host:slots'))).toHaveLength(2);
    expect(said.find((l) => l.includes('line 1'))).toMatch(/Keeping the 3 workers running/);
    // The two that were training from the start are never the ones stopped.
    expect(workers.slice(0, 2).every((w) => !w.exited)).toBe(true);
  });
});
