import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { ringtrainInProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `ringtrain …` through bin/ringtrain.js under Node, as a user would; `onStderr` sees its stderr as it comes. */
/** `entry`: the CLI's own, or the chaos entry (test/support/chaos), which can stand in for the adapter probe. */
function ringtrain(
  args: string[],
  onStderr?: (soFar: string, child: ChildProcess) => void,
  entry = 'bin/ringtrain.js',
): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '',
      stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      onStderr?.(stderr, child);
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The one JSON line that --json promises as the last line of stdout. */
function resultLine(r: Ran): Record<string, unknown> {
  expect(r.code, r.stderr).toBe(0);
  const lines = r.stdout.trim().split('\n');
  expect(lines.length, `stdout holds only the JSON line:\n${r.stdout}`).toBe(1);
  return JSON.parse(lines[0]);
}

function expectResult(json: Record<string, unknown>, runtime: string, steps: number): void {
  expect(json.runtime).toBe(runtime);
  expect(json.steps).toBe(steps);
  expect(typeof json.adapter).toBe('string');
  expect((json.adapter as string).length).toBeGreaterThan(0);
  expect(json.samples_per_s).toBeGreaterThan(0);
  // Ten classes: chance is 10%. 30 steps of the MLP get well past it.
  expect(json.test_accuracy).toBeGreaterThan(0.5);
  expect(json.test_accuracy).toBeLessThanOrEqual(1);
  // Latency hiding: losses are read every 10 steps, the evaluation once (no checkpoint in these runs).
  expect(json.gpu_waits).toBeGreaterThanOrEqual(1);
  expect(json.gpu_waits).toBeLessThanOrEqual(Math.ceil(steps / 10) + 1);
}

function params(path: string): Float32Array[] {
  const c = decodeCheckpoint(readFileSync(path), path);
  return Object.keys(c.params)
    .sort()
    .map((k) => c.params[k].data);
}

// Spawned runs train on software GPUs on 2 shared cores: give them time (no test asserts on time).
const SLOW = { timeout: 300_000 };

describe('ringtrain train', () => {
  it(
    'trains the MLP under Node when --runtime auto (the default) is told of a hardware adapter, says so first, and prints one JSON line',
    SLOW,
    async () => {
      const h100 = JSON.stringify({ description: 'NVIDIA H100 80GB HBM3', vendor: 'nvidia', isFallbackAdapter: false });
      const r = await ringtrain(
        ['train', '--model', 'mlp', '--steps', '30', '--batch', '32', '--json', '--assume-adapter', h100],
        undefined,
        'test/support/chaos/bin.js',
      );
      expectResult(resultLine(r), 'node', 30);
      expect(r.stderr.split('\n')[0]).toMatch(
        /^ringtrain: runtime node \(auto: hardware adapter nvidia NVIDIA H100 80GB HBM3: /,
      );
      expect(r.stderr).toMatch(/test accuracy \d+\.\d+%/);
    },
  );

  it(
    're-executes itself under Deno with --runtime deno; a run saved at step 20 and resumed to step 40 ends where an uninterrupted run ends',
    SLOW,
    async () => {
      const half = join(dir, 'half.safetensors'),
        resumed = join(dir, 'resumed.safetensors'),
        straight = join(dir, 'straight.safetensors');
      const common = [
        'train',
        '--model',
        'mlp',
        '--batch',
        '32',
        '--optimizer',
        'adamw',
        '--seed',
        '5',
        '--json',
        '--runtime',
        'deno',
      ];
      const firstRun = await ringtrain([...common, '--steps', '20', '--save', half]);
      const first = resultLine(firstRun);
      expect([first.runtime, first.steps]).toEqual(['deno', 20]);
      // No terminal, no bar: ten progress lines on stderr (every 2 of the 20 steps), the JSON line alone on stdout.
      const progress = firstRun.stderr
        .split('\n')
        .filter((l) => /^step \d+\/20, loss \d+\.\d{4}, \d+ samples\/s, \d+\.\d s$/.test(l));
      expect(
        progress.map((l) => Number(l.split(/[ /]/)[1])),
        firstRun.stderr,
      ).toEqual([2, 4, 6, 8, 10, 12, 14, 16, 18, 20]);
      const second = resultLine(await ringtrain([...common, '--steps', '40', '--resume', half, '--save', resumed]));
      expect([second.steps, second.lr_schedule]).toEqual([40, 'constant']);
      resultLine(await ringtrain([...common, '--steps', '40', '--save', straight]));
      const a = params(resumed),
        b = params(straight),
        start = params(half);
      let maxDiff = 0,
        moved = 0;
      a.forEach((t, i) =>
        t.forEach((v, j) => {
          maxDiff = Math.max(maxDiff, Math.abs(v - b[i][j]));
          moved = Math.max(moved, Math.abs(v - start[i][j]));
        }),
      );
      expect(moved).toBeGreaterThan(1e-3);
      expect(maxDiff).toBeLessThan(1e-5);
      const ckpt = decodeCheckpoint(readFileSync(resumed));
      expect([ckpt.step, ckpt.optimizer, ckpt.model, ckpt.extra.seed]).toEqual([40, 'adamw', 'mlp', '5']);

      // The cosine schedule is applied: same seed and steps, other weights.
      const cosine = join(dir, 'cosine.safetensors');
      const third = resultLine(
        await ringtrain([...common, '--steps', '20', '--lr-schedule', 'cosine', '--save', cosine]),
      );
      expect(third.lr_schedule).toBe('cosine');
      expect(decodeCheckpoint(readFileSync(cosine)).extra.lr_schedule).toBe('cosine');
      let scheduleDiff = 0;
      params(cosine).forEach((t, i) =>
        t.forEach((v, j) => (scheduleDiff = Math.max(scheduleDiff, Math.abs(v - start[i][j])))),
      );
      expect(scheduleDiff).toBeGreaterThan(1e-4);
    },
  );

  it(
    'trains on IDX files from --data (here: the bundled digits written as gzipped MNIST-format files)',
    SLOW,
    async () => {
      const { train, test } = await loadMnist();
      const idxDir = join(dir, 'idx');
      mkdirSync(idxDir);
      const write = (name: string, dims: number[], values: ArrayLike<number>) => {
        const header = Buffer.alloc(4 + 4 * dims.length);
        header[2] = 0x08;
        header[3] = dims.length;
        dims.forEach((d, i) => header.writeUInt32BE(d, 4 + 4 * i));
        writeFileSync(join(idxDir, name), gzipSync(Buffer.concat([header, Buffer.from(Uint8Array.from(values))])));
      };
      const n = 2000,
        m = 500;
      write(
        'train-images-idx3-ubyte.gz',
        [n, 28, 28],
        Array.from(train.images.subarray(0, n * 784), (v) => Math.round(v * 255)),
      );
      write('train-labels-idx1-ubyte.gz', [n], train.labels.subarray(0, n));
      write(
        't10k-images-idx3-ubyte.gz',
        [m, 28, 28],
        Array.from(test.images.subarray(0, m * 784), (v) => Math.round(v * 255)),
      );
      write('t10k-labels-idx1-ubyte.gz', [m], test.labels.subarray(0, m));
      // No --runtime: auto probes this machine's adapter (a software one here) and picks Deno.
      const r = await ringtrain(['train', '--data', idxDir, '--steps', '30', '--batch', '32', '--json']);
      expectResult(resultLine(r), 'deno', 30);
      expect(r.stderr.split('\n')[0]).toMatch(
        /^ringtrain: runtime deno \(auto: no hardware GPU \(WebGPU saw only the software adapter .*\)/,
      );
    },
  );

  it(
    'Ctrl-C stops after the current step, saves a checkpoint and exits with 130; that checkpoint is refused, clearly, by a run it does not fit and once damaged',
    SLOW,
    async () => {
      const path = join(dir, 'interrupted.safetensors');
      let sent = false;
      // The Node parent re-executes under Deno and forwards the signal to it.
      const r = await ringtrain(
        ['train', '--steps', '100000', '--batch', '16', '--save', path, '--json', '--runtime', 'deno'],
        (err, child) => {
          if (!sent && /ringtrain: training mlp/.test(err)) {
            sent = true;
            setTimeout(() => child.kill('SIGINT'), 1500);
          }
        },
      );
      expect(r.code, r.stderr).toBe(130);
      expect(r.stderr).toMatch(/stopping after this step and saving .*interrupted\.safetensors/);
      const json = JSON.parse(r.stdout.trim());
      expect(json.interrupted).toBe(true);
      expect(json.steps).toBeLessThan(100000);
      expect(decodeCheckpoint(readFileSync(path)).step).toBe(json.steps);

      // The refusals come before any GPU or data work: in-process, through the runCli that bin/ringtrain.js calls.
      let refused = await ringtrainInProcess([
        'train',
        '--steps',
        '4',
        '--optimizer',
        'adamw',
        '--resume',
        path,
        '--runtime',
        'node',
      ]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /saved with the sgd optimizer, not adamw; pass --optimizer sgd.*ERR_BAD_CHECKPOINT/,
      );
      const bytes = readFileSync(path);
      const cut = join(dir, 'cut.safetensors');
      writeFileSync(cut, bytes.subarray(0, bytes.length - 100));
      refused = await ringtrainInProcess(['train', '--steps', '4', '--resume', cut, '--runtime', 'node']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /cut\.safetensors: tensor '.*' ends at byte \d+ but the data section has \d+: the file is truncated/,
      );
    },
  );

  it('rejects bad options before doing any work', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['--model', 'resnet'],
        /--model must be one of mlp, cnn, transformer or a model file \(\.\/my-model\.ts\) \(got "resnet"\)/,
      ],
      [['--lr', '-0.1'], /--lr must be greater than 0 \(got "-0\.1"\)/],
      [['--lr', 'fast'], /--lr must be a number/],
      [['--batch', '0'], /--batch must be at least 1/],
      [['--epochs', '1.5'], /--epochs must be a whole number/],
      [['--optimizer', 'adam'], /--optimizer must be one of (\w+, )*adamw(, \w+)*/],
      [['--runtime', 'bun'], /--runtime must be one of node, deno, auto/],
      [['--batch', '9000'], /--batch must be at most 8192/],
      [
        ['--resume', join(dir, 'nothing.safetensors')],
        /cannot read checkpoint .*nothing\.safetensors \(no such file\)/,
      ],
      [['--data', join(dir, 'no-idx')], /train-images-idx3-ubyte\(\.gz\) not found/],
    ];
    // In-process: the same runCli that bin/ringtrain.js calls, with stderr captured.
    for (const [args, pattern] of cases) {
      // --runtime node: stay in this process (auto could re-execute under Deno, out of reach of the capture).
      const r = await ringtrainInProcess([
        'train',
        ...args,
        ...(args.includes('--runtime') ? [] : ['--runtime', 'node']),
      ]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(pattern);
    }
    const unknown = await ringtrainInProcess(['train', '--modle', 'mlp']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/unknown option '--modle'/);
    const schedule = await ringtrainInProcess(['train', '--lr-schedule', 'linear']);
    expect(schedule.code).not.toBe(0);
    expect(schedule.stderr).toMatch(/'linear' is invalid. Allowed choices are constant, cosine/);
    expect(existsSync(join(dir, 'nothing.safetensors'))).toBe(false);
  });
});
