/**
 * `ringtrain train --text FILE` as a user runs it: a few KB of text train a
 * small transformer, the checkpoint records its sizes and vocabulary, a resume
 * goes on, a resume at another width is refused naming it, and `generate`
 * writes text made of that file's characters only.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-text-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** About 4 KB of seeded text over a small alphabet (capitals, punctuation, a newline). */
function tinyText(): string {
  const words = ['The', 'cat', 'sat', 'on', 'a', 'mat,', 'dog', 'ran.', 'far', 'away;', 'and', 'home!'];
  let x = 7;
  const out: string[] = [];
  for (let i = 0; i < 800; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out.push(words[x % words.length] + (i % 17 === 16 ? '\n' : ''));
  }
  return out.join(' ');
}

const SIZES = ['--context', '16', '--layers', '1', '--width', '16', '--heads', '2'];
const BASE = ['--batch', '8', '--eval-limit', '16', '--runtime', 'deno'];

describe('train --text', () => {
  it('trains, saves its sizes and vocabulary, resumes, refuses another width, and generate writes only its characters', async () => {
    const text = join(dir, 'tiny.txt');
    writeFileSync(text, tinyText());
    const ckpt = join(dir, 'tiny.safetensors');
    const first = await ringtrain([
      'train',
      '--text',
      text,
      ...SIZES,
      ...BASE,
      '--steps',
      '20',
      '--save',
      ckpt,
      '--json',
    ]);
    expect(first.code, first.stderr).toBe(0);
    const r1 = JSON.parse(first.stdout.trim().split('\n').pop()!);
    expect(r1).toMatchObject({ steps: 20, model: 'transformer' });
    expect(r1.val_loss).toBeGreaterThan(0);
    const chars = [...new Set(tinyText())].sort();
    expect(r1.vocabulary_size).toBe(chars.length);
    const { metadata } = decodeSafetensors(readFileSync(ckpt));
    expect(JSON.parse(metadata.model_spec)).toMatchObject({
      kind: 'transformer',
      context: 16,
      layers: 1,
      width: 16,
      heads: 2,
      vocab: chars.length,
    });
    expect(JSON.parse(metadata.vocabulary)).toEqual({ tokens: 'chars', symbols: chars.map((c) => c.codePointAt(0)) });

    const resumed = await ringtrain([
      'train',
      '--text',
      text,
      ...SIZES,
      ...BASE,
      '--steps',
      '25',
      '--resume',
      ckpt,
      '--save',
      ckpt,
      '--json',
    ]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!)).toMatchObject({ steps: 25 });

    const wider = await ringtrain([
      'train',
      '--text',
      text,
      ...SIZES.slice(0, 4),
      '--width',
      '32',
      '--heads',
      '2',
      ...BASE,
      '--steps',
      '30',
      '--resume',
      ckpt,
    ]);
    expect(wider.code).not.toBe(0);
    expect(wider.stderr).toContain(
      `${ckpt} was saved with model options {"width":16} but this run builds {"width":32}`,
    );

    const sample = await ringtrain([
      'generate',
      '--checkpoint',
      ckpt,
      '--prompt',
      'The ',
      '--length',
      '120',
      '--temperature',
      '0.8',
      '--seed',
      '3',
    ]);
    expect(sample.code, sample.stderr).toBe(0);
    const out = sample.stdout.replace(/\n$/, '');
    expect(out.startsWith('The ')).toBe(true);
    expect([...out].length).toBe(4 + 120);
    expect([...out].filter((c) => !chars.includes(c))).toEqual([]);
    // The same seed gives the same text.
    const again = await ringtrain([
      'generate',
      '--checkpoint',
      ckpt,
      '--prompt',
      'The ',
      '--length',
      '120',
      '--temperature',
      '0.8',
      '--seed',
      '3',
    ]);
    expect(again.stdout).toBe(sample.stdout);
  }, 120_000);
});
