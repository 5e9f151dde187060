/**
 * `run --init-from` as a user runs it: two workers start from a Hugging Face
 * GPT-2 file (written by test/reference/gpt2_reference.py). Rank 0 reads it,
 * the job's start gives its weights to the other worker, and after a step
 * that moves no f32 weight (lr 1e-30) both ranks hold the same weights and
 * `export --format hf-gpt2` of rank 0's checkpoint gives the file back bit for
 * bit. A file that cannot be read, and --init-from beside --resume, stop the
 * launch before any worker starts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { ringtrain } from '../support/cli.ts';

const script = fileURLToPath(new URL('../reference/gpt2_reference.py', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-run-init-from-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ALPHABET = 'abcdefghijklmnopqrstu '; // 22 distinct characters: the vocabulary
const MODEL = [
  '--context',
  '16',
  '--layers',
  '2',
  '--width',
  '32',
  '--heads',
  '4',
  '--model-options',
  '{"positions":24}',
];

function text(): string {
  let x = 11;
  let out = ALPHABET;
  for (let i = 0; i < 3000; i++)
    out += ALPHABET[Math.floor(((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * ALPHABET.length)];
  return out;
}

function makeHfFile(path: string): void {
  const args = ['make', path, '--vocab', '22', '--layers', '2', '--width', '32', '--positions', '24', '--seed', '3'];
  const made = spawnSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8', timeout: 300_000 });
  if (made.status !== 0) throw new Error(`gpt2_reference.py make failed: ${made.stderr || made.error}`);
}

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);

describe('run --init-from', () => {
  const textFile = join(dir, 'text.txt');
  writeFileSync(textFile, text());
  const hf = join(dir, 'gpt2.safetensors');

  it(
    'two workers start from the file: both hold its weights, and rank 0 exports it back bit for bit',
    {
      timeout: 600_000,
    },
    async () => {
      makeHfFile(hf);
      const ckpt = join(dir, 'tuned.safetensors');
      const run = await ringtrain([
        'run',
        '-np',
        '2',
        '--runtime',
        'deno',
        '--text',
        textFile,
        ...MODEL,
        '--batch',
        '2',
        '--eval-limit',
        '4',
        '--init-from',
        hf,
        '--steps',
        '1',
        '--lr',
        '1e-30',
        '--save',
        ckpt,
        '--json',
      ]);
      expect(run.code, run.stderr).toBe(0);
      const result = lastJson(run.stdout) as { links_by_rank: { weights_crc32: number | null }[] };
      const crcs = result.links_by_rank.map((r) => r.weights_crc32);
      expect(crcs).toHaveLength(2);
      expect(crcs[0]).not.toBeNull();
      expect(crcs[1]).toBe(crcs[0]);

      const out = join(dir, 'back.safetensors');
      const exported = await ringtrain(['export', '--checkpoint', ckpt, '--out', out, '--format', 'hf-gpt2']);
      expect(exported.code, exported.stderr).toBe(0);
      const before = decodeSafetensors(readFileSync(hf), hf).tensors;
      const after = decodeSafetensors(readFileSync(out), out).tensors;
      expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
      for (const [name, t] of Object.entries(before)) {
        expect(after[name].shape, name).toEqual(t.shape);
        expect(Buffer.from(after[name].data.buffer).equals(Buffer.from(t.data.buffer)), `${name} bit for bit`).toBe(
          true,
        );
      }
    },
  );

  it('a file that cannot be read, or --init-from with --resume, stops the launch', async () => {
    const missing = join(dir, 'missing.safetensors');
    const unread = await ringtrain(['run', '-np', '2', '--text', textFile, ...MODEL, '--init-from', missing]);
    expect(unread.code).not.toBe(0);
    expect(unread.stderr).toContain(`--init-from ${missing}: cannot read it`);
    expect(unread.stderr).not.toContain('workers');

    const both = await ringtrain([
      'run',
      '-np',
      '2',
      '--text',
      textFile,
      ...MODEL,
      '--init-from',
      missing,
      '--resume',
      join(dir, 'ck.safetensors'),
    ]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain(`--init-from ${missing} starts a run from GPT-2's weights, --resume`);
  });
});
