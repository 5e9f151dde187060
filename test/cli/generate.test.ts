import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFromFlat, encodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { decodeSafetensors, encodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { runCli } from '../../src/cli/program.ts';
import { encodeWord } from '../../src/data/words.ts';
import { initTransformerTensors } from '../../src/reference/sample.ts';
import { transformerTensorShapes, WORDS_TRANSFORMER } from '../../src/reference/transformer.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-generate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `ringtrain …` through bin/ringtrain.js under Node, as a user runs it. */
function ringtrain(args: string[]): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '',
      stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * A transformer that spells `word` whatever it is fed: every block is switched
 * off (LayerNorm weights 0, so attention and MLP add nothing to the residual),
 * position p's embedding is the unit vector e_p, and the head maps e_p to the
 * letter at p (after lnf, e_p's own coordinate is about 7.9, every other -0.13,
 * so that letter wins by ~80 nats).
 */
function spellingModel(word: string): Record<string, { shape: number[]; data: Float32Array }> {
  const d = WORDS_TRANSFORMER.width;
  const t: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [name, shape] of transformerTensorShapes(WORDS_TRANSFORMER))
    t[name] = { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) };
  for (let p = 0; p < WORDS_TRANSFORMER.context; p++) t['pos.weight'].data[p * d + p] = 1;
  t['lnf.weight'].data.fill(1);
  [...encodeWord(word), 0].forEach((letter, p) => (t['head.weight'].data[letter * d + p] = 10));
  return t;
}

/** The model as `ringtrain train --save` writes it: a checkpoint with param/ names and optimizer state. */
function asCheckpoint(tensors: ReturnType<typeof spellingModel>): Uint8Array {
  let offset = 0;
  const layout = Object.entries(tensors).map(([name, t]) => ({
    name,
    shape: t.shape,
    offset: (offset += t.data.length) - t.data.length,
    length: t.data.length,
  }));
  const flat = new Float32Array(offset);
  for (const e of layout) flat.set(tensors[e.name].data, e.offset);
  return encodeCheckpoint(
    checkpointFromFlat({
      model: 'transformer',
      optimizer: 'adamw',
      step: 1000,
      layout,
      params: flat,
      optimizerState: { m: new Float32Array(offset) },
    }),
  );
}

/** `ringtrain …` in this process (no start-up cost), capturing what it writes. */
async function inProcess(args: string[]): Promise<Ran> {
  const out = process.stdout.write,
    err = process.stderr.write;
  let stdout = '',
    stderr = '';
  const capture = (add: (s: string) => void) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      add(String(chunk));
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture((s) => (stdout += s));
  process.stderr.write = capture((s) => (stderr += s));
  try {
    const code = await runCli(args);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}

const SLOW = { timeout: 120_000 };

describe('ringtrain generate', () => {
  it('prints the words the checkpoint spells, one per line', SLOW, async () => {
    const path = join(dir, 'cab.safetensors');
    writeFileSync(path, asCheckpoint(spellingModel('cab')));
    const r = await ringtrain(['generate', '--checkpoint', path, '--count', '20']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('cab\n'.repeat(20));
  });

  it('samples a–z words from a state dict, the same for the same seed, others for another', SLOW, async () => {
    const path = join(dir, 'random.safetensors');
    writeFileSync(path, encodeSafetensors(initTransformerTensors(WORDS_TRANSFORMER, 11)));
    const a = await inProcess(['generate', '--checkpoint', path, '--count', '20', '--seed', '3']);
    const again = await inProcess(['generate', '--checkpoint', path, '--count', '20', '--seed', '3']);
    const other = await inProcess([
      'generate',
      '--checkpoint',
      path,
      '--count',
      '20',
      '--seed',
      '4',
      '--temperature',
      '1.5',
    ]);
    const greedy = await inProcess(['generate', '--checkpoint', path, '--count', '3', '--temperature', '0']);
    for (const r of [a, again, other, greedy]) expect(r.code, r.stderr).toBe(0);
    const words = a.stdout.split('\n').slice(0, -1);
    expect(words.length).toBe(20);
    for (const w of words) expect(w).toMatch(/^[a-z]{1,31}$/);
    expect(again.stdout).toBe(a.stdout);
    expect(other.stdout).not.toBe(a.stdout);
    // Temperature 0 takes the likeliest letter every time: one word, three times.
    const g = greedy.stdout.split('\n').slice(0, -1);
    expect(g.length).toBe(3);
    expect(new Set(g).size).toBe(1);
  });

  it('refuses a checkpoint of another model, a missing file and a bad count', SLOW, async () => {
    const cnn = join(dir, 'cnn.safetensors');
    writeFileSync(
      cnn,
      encodeCheckpoint(
        checkpointFromFlat({
          model: 'cnn',
          optimizer: 'sgd',
          step: 1,
          layout: [{ name: 'conv1.weight', shape: [2], offset: 0, length: 2 }],
          params: new Float32Array(2),
        }),
      ),
    );
    const wrong = await inProcess(['generate', '--checkpoint', cnn]);
    const missing = await inProcess(['generate', '--checkpoint', join(dir, 'nope.safetensors')]);
    const count = await inProcess(['generate', '--checkpoint', cnn, '--count', '0']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/holds a 'cnn' model, not a transformer.*\[ERR_BAD_CHECKPOINT\]/);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nope\.safetensors \(no such file\)/);
    expect(count.code).toBe(1);
    expect(count.stderr).toMatch(/--count "0": give a whole number of words/);
    for (const r of [wrong, missing, count]) expect(r.stdout).toBe('');
  });
});

describe('ringtrain export', () => {
  it(
    'writes the weights alone under their state-dict names, which generate reads like the checkpoint',
    SLOW,
    async () => {
      const model = spellingModel('zoo');
      const ckpt = join(dir, 'zoo.safetensors');
      const out = join(dir, 'zoo-state-dict.safetensors');
      writeFileSync(ckpt, asCheckpoint(model));
      const r = await inProcess(['export', '--checkpoint', ckpt, '--out', out]);
      expect(r.code, r.stderr).toBe(0);
      const { tensors, metadata } = decodeSafetensors(readFileSync(out));
      expect(Object.keys(tensors)).toEqual(transformerTensorShapes(WORDS_TRANSFORMER).map(([n]) => n));
      for (const [name, t] of Object.entries(model)) {
        expect(tensors[name].shape).toEqual(t.shape);
        expect(tensors[name].data).toEqual(t.data);
      }
      expect([metadata.model, metadata.step]).toEqual(['transformer', '1000']);
      const g = await inProcess(['generate', '--checkpoint', out, '--count', '2']);
      expect(g.stdout).toBe('zoo\nzoo\n');
      const self = await inProcess(['export', '--checkpoint', ckpt, '--out', ckpt]);
      expect(self.code).toBe(1);
      expect(self.stderr).toMatch(/--out is the checkpoint itself/);
      expect(decodeSafetensors(readFileSync(ckpt)).tensors['optim/m']).toBeDefined();
    },
  );
});
