/**
 * `ringtrain train --text FILE --tokenizer gpt2` as a user runs it, under the
 * default runtime (Deno on this machine): the text is tokenized into the
 * cache, a small transformer with GPT-2's 50,257 outputs trains three steps,
 * the checkpoint records the tokenizer, `generate` prints GPT-2 tokens decoded
 * as text, and a resume that asks for another tokenizer is refused naming both.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { gpt2Tokenizer } from '../../src/data/tokenizer.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-gpt2-text-'));
// The workers inherit it: the test's caches stay in its folder.
process.env.RINGTRAIN_CACHE_DIR = join(dir, 'cache');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** About 25 KB of seeded English-like sentences. */
function text(): string {
  const words = [
    'the',
    'cat',
    'sat',
    'on',
    'a',
    'mat',
    'and',
    'dog',
    'ran',
    'far',
    'away',
    'from',
    'home',
    'while',
    'it',
    'rained',
  ];
  let x = 11;
  const lines: string[] = [];
  for (let i = 0; i < 500; i++) {
    const line: string[] = [];
    for (let k = 0; k < 9; k++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      line.push(words[x % words.length]);
    }
    lines.push(line.join(' ').replace(/^./, (c) => c.toUpperCase()) + '.');
  }
  return lines.join('\n') + '\n';
}

describe('train --text --tokenizer gpt2', () => {
  it('trains under the default runtime, records the tokenizer, generates GPT-2 text, and refuses a resume with another tokenizer', async () => {
    const file = join(dir, 'story.txt');
    writeFileSync(file, text());
    const ckpt = join(dir, 'story.safetensors');
    const r = await ringtrain([
      'train',
      '--text',
      file,
      '--tokenizer',
      'gpt2',
      '--layers',
      '1',
      '--width',
      '32',
      '--heads',
      '2',
      '--context',
      '32',
      '--batch',
      '4',
      '--steps',
      '3',
      '--eval-limit',
      '8',
      '--save',
      ckpt,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    const tokens = (await gpt2Tokenizer()).encode(text());
    expect(result).toMatchObject({
      steps: 3,
      runtime: 'deno',
      tokenizer: 'gpt2',
      vocabulary_size: 50257,
      text_tokens: tokens.length,
    });
    // A model that knows nothing yet: its loss is near ln 50,257 = 10.8.
    expect(result.train_loss).toBeGreaterThan(9);
    expect(result.train_loss).toBeLessThan(12);
    expect(readdirSync(join(dir, 'cache'))).toEqual([result.token_cache.split('/').pop()]);

    const { metadata } = decodeSafetensors(readFileSync(ckpt));
    expect(JSON.parse(metadata.tokenizer)).toEqual({ name: 'gpt2', vocab_size: 50257 });
    expect(JSON.parse(metadata.model_spec)).toMatchObject({
      context: 32,
      layers: 1,
      width: 32,
      heads: 2,
      vocab: 50257,
    });

    const sample = await ringtrain([
      'generate',
      '--checkpoint',
      ckpt,
      '--prompt',
      'The cat',
      '--length',
      '12',
      '--seed',
      '2',
    ]);
    expect(sample.code, sample.stderr).toBe(0);
    const out = sample.stdout.replace(/\n$/, '');
    expect(out.startsWith('The cat')).toBe(true);
    // Twelve tokens drawn from all of GPT-2's vocabulary are words and pieces of words, not twelve characters.
    expect(out.length - 'The cat'.length).toBeGreaterThan(12);

    const other = await ringtrain([
      'train',
      '--text',
      file,
      '--tokenizer',
      'char',
      '--layers',
      '1',
      '--width',
      '32',
      '--heads',
      '2',
      '--context',
      '32',
      '--batch',
      '4',
      '--steps',
      '4',
      '--resume',
      ckpt,
    ]);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain(
      `${ckpt} was trained with the gpt2 tokenizer (50,257 tokens), but this run asks for --tokenizer char`,
    );
  }, 240_000);
});
