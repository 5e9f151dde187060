import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import { countedTargets, IGNORE_LABEL } from '../../src/data/dataset.ts';
import { batches, batchOf, drawWithReplacement, rankShareOfDraw } from '../../src/data/batches.ts';
import {
  decodeWord,
  encodeWord,
  splitWords,
  WORD_CONTEXT,
  wordsDataset,
  wordsFromDictionary,
  wordsFromDictionaryText,
} from '../../src/data/words.ts';
import { loadWords } from '../../src/data/words.node.ts';

const sha256 = (words: string[]) => createHash('sha256').update(words.join('\n')).digest('hex');

describe('the CMUdict words', () => {
  it('are the 116,505 words of the spec, split 104,854 / 11,651 by index % 10', async () => {
    const split = await loadWords();
    expect(split.words.length).toBe(116_505);
    expect([split.trainWords.length, split.validationWords.length]).toEqual([104_854, 11_651]);
    expect([split.train.count, split.validation.count]).toEqual([104_854, 11_651]);
    expect(split.words.slice(0, 4)).toEqual(['a', 'aa', 'aaa', 'aaberg']);
    expect(split.words.slice(-1)).toEqual(['zywicki']);
    expect(split.validationWords.slice(0, 3)).toEqual(['a', 'aamodt', 'aase']);
    // Digests of the lists made by an independent Python script from the same file (sorted(set(...)), len <= 30).
    expect(sha256(split.words)).toBe('cebadbd473dc8773f04aca24c71ef35c7cd9170c8112891bf8c0386cfe205f68');
    expect(sha256(split.validationWords)).toBe('b3566b8d62c499392468961ba0878efeb000f4403daf32e184da77ddd83e5ab5');
    expect(
      split.words.findIndex((w, i) => i > 0 && !(split.words[i - 1] < w)),
      'sorted and unique',
    ).toBe(-1);
    // The metric's denominator: every letter plus the end of each word.
    expect(countedTargets(split.validation.labels)).toBe(97_834);
    expect(countedTargets(split.train.labels)).toBe(881_033);
  });

  it('lowercases keys, drops variant suffixes and anything but a–z, and words over 30 letters', () => {
    const text = [
      'A  AH0',
      'A(1)  EY1',
      "A'S  EY1 Z",
      'A.  EY1',
      'ABC(2)  EY1',
      'AB-C  X',
      'Zed  Z',
      `${'Q'.repeat(31)}  Q`,
      `${'R'.repeat(30)}  R`,
      ';;; comment',
      '',
      'B2B  B',
    ].join('\n');
    expect(wordsFromDictionary(text)).toEqual(['a', 'abc', 'r'.repeat(30), 'zed']);
    expect(() => wordsFromDictionary('\n\n')).toThrow(/no a–z word/);
    let err: unknown;
    try {
      wordsFromDictionaryText('CAT  K AE1 T\nDOG  D AO1 G');
    } catch (e) {
      err = e;
    }
    expect(isRingtrainError(err, 'ERR_BAD_DATA')).toBe(true);
    expect(String(err)).toMatch(/found 2 words, expected 116505/);
  });

  it('encodes a word as gpt_ref.py does: x = \\n+word padded with 0, y = word+\\n padded with -1', () => {
    const d = wordsDataset(['cab', 'z']);
    expect([d.count, d.inputSize, d.positions, d.classes]).toEqual([2, 32, 32, 27]);
    const row = (a: ArrayLike<number>, r: number) => Array.from(a).slice(r * WORD_CONTEXT, (r + 1) * WORD_CONTEXT);
    expect(row(d.inputs, 0)).toEqual([0, 3, 1, 2, ...new Array(28).fill(0)]);
    expect(row(d.labels, 0)).toEqual([3, 1, 2, 0, ...new Array(28).fill(IGNORE_LABEL)]);
    expect(row(d.inputs, 1)).toEqual([0, 26, ...new Array(30).fill(0)]);
    expect(row(d.labels, 1)).toEqual([26, 0, ...new Array(30).fill(IGNORE_LABEL)]);
    expect(decodeWord(row(d.labels, 0))).toBe('cab');
    expect(encodeWord('az')).toEqual([1, 26]);
    expect(() => encodeWord('a-b')).toThrow(/only the letters a–z/);
    expect(() => wordsDataset(['a'.repeat(32)])).toThrow(/at most 31 fit/);
  });

  it('splits any list by index % 10', () => {
    const words = Array.from({ length: 25 }, (_, i) =>
      String.fromCharCode(97 + (i % 26)).repeat(1 + Math.floor(i / 26)),
    );
    const s = splitWords(words);
    expect(s.validationWords).toEqual([words[0], words[10], words[20]]);
    expect(s.trainWords.length).toBe(22);
  });

  it('is the same list under Deno', async () => {
    const { words } = await loadWords();
    const deno = 'node_modules/.bin/deno';
    expect(existsSync(deno), 'deno is missing: run npm ci (the deno npm package ships it)').toBe(true);
    const script = `import { loadWords } from './src/data/words.node.ts';
const s = await loadWords();
console.log(JSON.stringify([s.words.length, s.validation.count, s.words.join('\\n').length, s.words[58251]]));`;
    const r = spawnSync(deno, ['eval', '--ext=ts', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toEqual([words.length, 11_651, words.join('\n').length, words[58251]]);
  });
});

describe('batches drawn with replacement', () => {
  it('are a pure function of (seed, step), uniform over the examples, and differ between steps and seeds', () => {
    const a = drawWithReplacement(1000, 256, 5, 17);
    expect([...drawWithReplacement(1000, 256, 5, 17)]).toEqual([...a]);
    expect([...drawWithReplacement(1000, 256, 5, 18)]).not.toEqual([...a]);
    expect([...drawWithReplacement(1000, 256, 6, 17)]).not.toEqual([...a]);
    // 200 draws of 256 from 10 examples: each example about 5,120 times (sd ≈ 68).
    const hits = new Array(10).fill(0);
    for (let step = 0; step < 200; step++) for (const i of drawWithReplacement(10, 256, 1, step)) hits[i]++;
    for (const h of hits) expect(Math.abs(h - 5120)).toBeLessThan(400);
    // With replacement: 256 draws from 1,000 repeat some example almost surely (P(no repeat) < 1e-14).
    expect(new Set(a).size).toBeLessThan(256);
    expect(() => drawWithReplacement(0, 4, 1, 0)).toThrow(/empty/);
  });

  it('run through batches(): an epoch of count/batch steps, step e·n + b drawn, resumable, one share per rank', () => {
    const d = wordsDataset(Array.from({ length: 21 }, (_, i) => 'abcdefghijklmnopqrstu'.slice(0, i + 1)));
    const epoch1 = [...batches(d, { batchSize: 4, seed: 2, epoch: 1, replacement: true })];
    expect(epoch1.length).toBe(5);
    epoch1.forEach((b, k) => expect([...b.indices]).toEqual([...drawWithReplacement(21, 4, 2, 5 + k)]));
    for (const b of epoch1)
      for (let k = 0; k < b.size; k++)
        expect(decodeWord(b.labels.subarray(k * 32, (k + 1) * 32)).length).toBe(b.indices[k] + 1);
    const resumed = [...batches(d, { batchSize: 4, seed: 2, epoch: 1, replacement: true, startBatch: 3 })];
    expect(resumed.map((b) => [...b.indices])).toEqual(epoch1.slice(3).map((b) => [...b.indices]));
    const ranks = [0, 1].map((rank) => [
      ...batches(d, { batchSize: 2, seed: 2, epoch: 1, replacement: true, share: { rank, size: 2 } }),
    ]);
    expect(ranks[0].length).toBe(5);
    ranks[0].forEach((b, k) =>
      expect([...b.indices, ...ranks[1][k].indices].sort()).toEqual([...epoch1[k].indices].sort()),
    );
    expect(() => [...batches(d, { batchSize: 22, replacement: true })]).toThrow(/larger than the 21 examples/);
  });

  it('split over N ranks covers exactly the one-peer batch', () => {
    const draw = drawWithReplacement(50, 12, 3, 0);
    const parts = [0, 1, 2].map((r) => rankShareOfDraw(draw, r, 3));
    expect(parts.flatMap((p) => [...p]).sort((x, y) => x - y)).toEqual([...draw].sort((x, y) => x - y));
    expect(() => rankShareOfDraw(draw, 0, 5)).toThrow(/multiple of 5/);
    const d = wordsDataset(['ab', 'c', 'de']);
    const b = batchOf(d, Uint32Array.from([2, 2, 1]));
    expect(b.x.length).toBe(3 * 32);
    expect([
      decodeWord(b.labels.subarray(0, 32)),
      decodeWord(b.labels.subarray(32, 64)),
      decodeWord(b.labels.subarray(64)),
    ]).toEqual(['de', 'de', 'c']);
  });
});
