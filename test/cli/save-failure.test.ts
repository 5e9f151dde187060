/**
 * A --save target that fails mid-run must not lose the run. After the first
 * epoch's save lands, the --save directory is moved away and a plain file put
 * in its place: every later save fails with ENOTDIR. (chmod would not do: the
 * tests run as root, whom permissions do not stop; a path whose directory is a
 * file fails for root as for anyone.) Training goes on, each later save is
 * tried again and reported with its cause, the state goes to a per-rank file in
 * the temporary directory, and the launcher's final report says where.
 * Real launcher, real server, a real Deno worker.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFromFlat, decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { CheckpointSaver } from '../../src/cli/commands/checkpoint-saver.node.ts';
import { requireNetns, until } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-save-failure-'));
const launchers: ChildProcess[] = [];
afterAll(() => {
  for (const c of launchers) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('a --save directory that stops being writable mid-run', () => {
  it('keeps training, reports each failed save with its cause, and leaves the state in a per-rank fallback file the report names', async () => {
    requireNetns();
    const out = join(dir, 'out');
    const temp = join(dir, 'tmp'); // the workers' temporary directory (TMPDIR), where the fallback goes
    mkdirSync(out);
    mkdirSync(temp);
    const save = join(out, 'mlp.safetensors');
    // 8,000 digits at 500 a step: saves at steps 16, 32 and 48.
    const args = [
      'run',
      '-np',
      '1',
      '--runtime',
      'deno',
      '--model',
      'mlp',
      '--batch',
      '500',
      '--epochs',
      '3',
      '--seed',
      '7',
      '--save',
      save,
      '--json',
    ];
    const child = spawn(process.execPath, [join(process.cwd(), 'bin/ringtrain.js'), ...args], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TMPDIR: temp },
    });
    launchers.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    await until(
      () => existsSync(save) || child.exitCode !== null,
      'the first save',
      240_000,
      () => stderr,
    );
    renameSync(out, join(dir, 'out-moved'));
    writeFileSync(out, 'not a directory');
    const code = await exit;

    // The run trained to the end, and said, for each later save, what failed and where the state went.
    expect(stderr).toMatch(/epoch 3: step 48/);
    const failures = [
      ...stderr.matchAll(
        /could not save step (\d+) in \S*mlp\.safetensors \((ENOTDIR[^)]*)\); training goes on and the next save tries again\. Step \d+ is in (\S+) meanwhile/g,
      ),
    ];
    expect(
      failures.map((m) => Number(m[1])),
      stderr,
    ).toEqual([32, 48]);
    expect(failures[1][3].startsWith(temp), failures[1][3]).toBe(true);
    expect(failures[1][3]).toMatch(/ringtrain-run-[0-9a-f]{8}-rank0-step48\.safetensors$/);
    expect(
      readdirSync(temp)
        .filter((f) => f.endsWith('.safetensors'))
        .sort(),
    ).toEqual([
      expect.stringMatching(/-rank0-step32\.safetensors$/),
      expect.stringMatching(/-rank0-step48\.safetensors$/),
    ]);
    expect(decodeCheckpoint(readFileSync(failures[1][3])).step).toBe(48);

    // The final report names the file, and the command fails: the checkpoint is not where --save said.
    expect(stderr).toContain(`the checkpoint of step 48 could not be written to ${save} (ENOTDIR`);
    expect(stderr).toContain(`it is in ${failures[1][3]}`);
    expect(code, stderr).toBe(1);
    const summary = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(summary).toMatchObject({
      steps: 48,
      saved: failures[1][3],
      save_failed: { step: 48, path: save, fallback: failures[1][3] },
    });
    // What landed before the disk went away is still there.
    expect(decodeCheckpoint(readFileSync(join(dir, 'out-moved', 'mlp.safetensors'))).step).toBe(16);
  }, 400_000);

  it('tries the target again at the next save, and says when it is writable again', async () => {
    const out = join(dir, 'again');
    mkdirSync(out);
    const save = join(out, 'm.safetensors');
    const lines: string[] = [];
    const saver = new CheckpointSaver(
      { save, overwrite: false },
      () => ({ job: '../../evil job', rank: 2 }),
      (l) => void lines.push(l),
    );
    const layout = [{ name: 'w', shape: [2], offset: 0, length: 2 }];
    const at = (step: number) =>
      checkpointFromFlat({ model: 'mlp', optimizer: 'sgd', step, layout, params: Float32Array.of(step, 1) });
    await saver.save(at(1));
    rmSync(out, { recursive: true });
    writeFileSync(out, 'not a directory');
    await saver.save(at(2));
    expect(saver.trouble).toMatchObject({ step: 2, path: save, error: expect.stringMatching(/^ENOTDIR/) });
    // Named per job and rank, inside the temporary directory whatever the job's id says.
    expect(saver.trouble!.fallback).toBe(join(tmpdir(), 'ringtrain-______evil_job-rank2-step2.safetensors'));
    expect(decodeCheckpoint(readFileSync(saver.trouble!.fallback!)).step).toBe(2);
    rmSync(saver.trouble!.fallback!);
    rmSync(out);
    mkdirSync(out);
    await saver.save(at(3));
    expect(saver.trouble).toBeNull();
    expect(decodeCheckpoint(readFileSync(save)).step).toBe(3);
    expect(lines.at(-1)).toBe(`saved step 3 in ${save}: the target is writable again`);
  });
});
