/**
 * GPT-2 through the CLI, as a user runs it: `train --text --init-from` a
 * Hugging Face GPT-2 file (written by test/reference/gpt2_reference.py),
 * `export --format hf-gpt2` gives its tensors back bit for bit (all 24 rows of
 * a wpe longer than the 16-token window: `positions`), `predict` on the
 * checkpoint gives numpy's float64 next-token logits; a file of another size is
 * refused naming the tensor and both shapes; and a character model saved
 * before GPT-2's architecture (its model_spec has no arch) still resumes as
 * the classic model it is.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { transformerParamCount } from '../../src/reference/transformer.ts';
import { ringtrain } from '../support/cli.ts';

const script = fileURLToPath(new URL('../reference/gpt2_reference.py', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-gpt2-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ALPHABET = 'abcdefghijklmnopqrstu '; // 22 distinct characters: the vocabulary
const SIZES = ['--context', '16', '--layers', '2', '--width', '32', '--heads', '4'];
const BASE = ['--batch', '4', '--eval-limit', '4', '--runtime', 'deno'];

function python(args: string[]): string {
  const run = spawnSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8', timeout: 300_000 });
  if (run.status !== 0) throw new Error(`gpt2_reference.py ${args[0]} failed: ${run.stderr || run.error}`);
  return run.stdout;
}

function text(): string {
  let x = 5;
  // Every character at least once (the vocabulary is 22 whatever the draws), then seeded draws from the LCG's high bits.
  let out = ALPHABET;
  for (let i = 0; i < 3000; i++)
    out += ALPHABET[Math.floor(((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * ALPHABET.length)];
  return out;
}

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!);

describe('GPT-2 through the CLI', () => {
  const textFile = join(dir, 'text.txt');
  writeFileSync(textFile, text());

  it(
    'train --init-from, export --format hf-gpt2 bit for bit, predict = numpy; another size refused by name',
    { timeout: 600_000 },
    async () => {
      const hf = join(dir, 'gpt2.safetensors');
      python(['make', hf, '--vocab', '22', '--layers', '2', '--width', '32', '--positions', '24', '--seed', '7']);
      const ckpt = join(dir, 'tuned.safetensors');
      // An lr of 1e-30 moves no f32 weight: the checkpoint holds the file's weights after a real step through the CLI.
      const run = await ringtrain([
        'train',
        '--text',
        textFile,
        ...SIZES,
        ...BASE,
        '--model-options',
        '{"positions":24}',
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
      expect(lastJson(run.stdout)).toMatchObject({
        params: transformerParamCount({
          vocab: 22,
          context: 16,
          positions: 24,
          layers: 2,
          width: 32,
          heads: 4,
          arch: 'gpt2',
        }),
        vocabulary_size: 22,
        steps: 1,
      });
      expect(JSON.parse(decodeCheckpoint(readFileSync(ckpt), ckpt).extra.model_spec)).toMatchObject({
        context: 16,
        positions: 24,
      });

      const out = join(dir, 'back.safetensors');
      const exported = await ringtrain(['export', '--checkpoint', ckpt, '--out', out, '--format', 'hf-gpt2']);
      expect(exported.code, exported.stderr).toBe(0);
      const before = decodeSafetensors(readFileSync(hf), hf).tensors;
      const after = decodeSafetensors(readFileSync(out), out).tensors;
      expect(Object.keys(after)).toEqual(Object.keys(before));
      for (const [name, t] of Object.entries(before)) {
        expect(after[name].shape, name).toEqual(t.shape);
        expect(Buffer.from(after[name].data.buffer).equals(Buffer.from(t.data.buffer)), `${name} bit for bit`).toBe(
          true,
        );
      }

      const rows = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [21]];
      const rowsFile = join(dir, 'ids.json');
      writeFileSync(rowsFile, JSON.stringify(rows));
      const expected = (JSON.parse(python(['logits', hf, rowsFile, '--heads', '4'])) as { logits: number[][] }).logits;
      const predicted = await ringtrain(['predict', '--checkpoint', ckpt, '--input', rowsFile, '--json']);
      expect(predicted.code, predicted.stderr).toBe(0);
      const p = lastJson(predicted.stdout) as { next_tokens: number[]; logits: number[][] };
      rows.forEach((_, r) => {
        const scale = Math.max(...expected[r].map(Math.abs));
        expect(Math.max(...expected[r].map((v, c) => Math.abs(v - p.logits[r][c]))) / scale, `row ${r}`).toBeLessThan(
          1e-4,
        );
        expect(p.next_tokens[r]).toBe(expected[r].indexOf(Math.max(...expected[r])));
      });

      const narrow = await ringtrain([
        'train',
        '--text',
        textFile,
        ...SIZES.slice(0, 4),
        '--width',
        '16',
        '--heads',
        '4',
        ...BASE,
        '--init-from',
        hf,
        '--steps',
        '1',
      ]);
      expect(narrow.code).not.toBe(0);
      expect(narrow.stderr).toContain(`${hf}: tensor 'wte.weight' has shape [22, 32], but this model needs [22, 16]`);
      const longer = await ringtrain([
        'train',
        '--text',
        textFile,
        ...SIZES,
        ...BASE,
        '--model-options',
        '{"positions":32}',
        '--init-from',
        hf,
        '--steps',
        '1',
      ]);
      expect(longer.code).not.toBe(0);
      expect(longer.stderr).toContain(
        `${hf}: tensor 'wpe.weight' has shape [24, 32], but this model needs [32, 32] (at least that many positions)`,
      );
    },
  );

  it("--preset gpt2 refuses a --context longer than GPT-2's 1,024 positions, naming both", async () => {
    const long = await ringtrain([
      'train',
      '--text',
      textFile,
      '--preset',
      'gpt2',
      '--context',
      '2048',
      '--steps',
      '1',
    ]);
    expect(long.code).not.toBe(0);
    expect(long.stderr).toContain(
      "--context 2048 is longer than --preset gpt2's 1024 positions; give --context 1024 or less",
    );
  });

  it('--preset gpt2 needs a text', async () => {
    const preset = await ringtrain(['train', '--preset', 'gpt2', '--steps', '1']);
    expect(preset.code).not.toBe(0);
    expect(preset.stderr).toContain('--preset gpt2 sizes a language model on a text; add --text FILE');
  });

  it(
    "a character model saved before GPT-2's architecture resumes as the classic model",
    { timeout: 600_000 },
    async () => {
      const old = join(dir, 'old.safetensors');
      const first = await ringtrain([
        'train',
        '--text',
        textFile,
        ...SIZES,
        ...BASE,
        '--model-options',
        '{"arch":"classic"}',
        '--steps',
        '2',
        '--save',
        old,
        '--json',
      ]);
      expect(first.code, first.stderr).toBe(0);
      // A classic model records no arch, exactly as every checkpoint from before the choice does.
      const c = decodeCheckpoint(readFileSync(old), old);
      expect(JSON.parse(c.extra.model_spec)).not.toHaveProperty('arch');
      expect(JSON.parse(c.extra.model_spec)).not.toHaveProperty('positions');
      expect(Object.keys(c.params)).toContain('head.weight');

      const resumed = await ringtrain([
        'train',
        '--text',
        textFile,
        ...SIZES,
        ...BASE,
        '--steps',
        '3',
        '--resume',
        old,
        '--save',
        old,
        '--overwrite',
        '--json',
      ]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(lastJson(resumed.stdout)).toMatchObject({
        steps: 3,
        params: transformerParamCount({ vocab: 22, context: 16, layers: 2, width: 32, heads: 4 }),
      });
      expect(Object.keys(decodeCheckpoint(readFileSync(old), old).params)).toContain('head.weight');
    },
  );
});
