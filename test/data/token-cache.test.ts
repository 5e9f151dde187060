/**
 * The token cache: a text tokenized in small pieces, cut anywhere (mid
 * character, mid word), gives the ids of the whole text encoded at once; the
 * file reads back what was written (u16 ids, u32 past 65,536 tokens); a
 * damaged or stale file is rebuilt, never read; two processes that build the
 * same cache at once leave one whole file; and the windows a split reads from
 * it cover the corpus.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gatherExamples } from '../../src/data/dataset.ts';
import { loadText, type TextSource } from '../../src/data/text.node.ts';
import { textVocabulary } from '../../src/data/text.ts';
import { splitTokens } from '../../src/data/text-split.ts';
import { cachedTokens, lastSafeCut } from '../../src/data/token-cache.node.ts';
import { gpt2Tokenizer, vocabularyTokenizer } from '../../src/data/tokenizer.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-token-cache-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A text in memory, handed over in pieces of `piece` bytes whatever the reader asks (cuts inside characters and words). */
function source(text: string, piece: number): TextSource {
  const bytes = new TextEncoder().encode(text);
  return {
    name: 'test text',
    sha256: createHash('sha256').update(bytes).digest('hex'),
    size: bytes.length,
    *pieces() {
      for (let at = 0; at < bytes.length; at += piece) yield bytes.slice(at, at + piece);
    },
  };
}

/** 120 KB of the Brown corpus with other scripts, runs of spaces and blank lines mixed in. */
const TEXT = loadText('@brown')
  .text.slice(0, 120_000)
  .replace(/\. /g, (m, at: number) => (at % 7 === 0 ? '.  日本語 ' : at % 11 === 0 ? '.\n\n\t' : m));

describe('token cache', () => {
  it('cuts only before whitespace that follows a non-space', () => {
    expect(lastSafeCut('one two  three')).toBe(7);
    expect(lastSafeCut('one\n\n')).toBe(3);
    expect(lastSafeCut('   ')).toBe(0);
    expect(lastSafeCut('word')).toBe(0);
  });

  it('gpt2: ids from small pieces are those of the whole text; the file reads them back as u16', async () => {
    const { cache, built } = await cachedTokens(source(TEXT, 997), 'gpt2', join(dir, 'gpt2'));
    expect(built).toBeDefined();
    const whole = (await gpt2Tokenizer()).encode(TEXT);
    expect(cache.header).toMatchObject({ name: 'gpt2', vocabSize: 50257, idBytes: 2, count: whole.length });
    expect(cache.read(0, cache.length)).toEqual(whole);
    expect(cache.read(1000, 1010)).toEqual(whole.subarray(1000, 1010));
    expect(() => cache.read(cache.length - 1, cache.length + 1)).toThrow(`are outside the ${cache.length}`);
    // Each file is the header and two bytes an id.
    const file = readdirSync(join(dir, 'gpt2'));
    expect(file).toEqual([`${source(TEXT, 1).sha256}-gpt2.tokens`]);
    expect(readFileSync(cache.path).length - whole.length * 2).toBeLessThan(512);
    cache.close();
    // The second time it is read, not built.
    const again = await cachedTokens(source(TEXT, 997), 'gpt2', join(dir, 'gpt2'));
    expect(again.built).toBeUndefined();
    again.cache.close();
  });

  it('char and byte (and the default): the ids of the text data in memory; u32 past 65,536 tokens', async () => {
    for (const [name, tokens] of [
      ['char', 'chars'],
      ['byte', 'bytes'],
      [undefined, undefined],
    ] as const) {
      const { cache } = await cachedTokens(source(TEXT, 1001), name, join(dir, 'vocab'));
      const expected = vocabularyTokenizer(textVocabulary(TEXT, tokens));
      expect(cache.header.record).toBe(expected.record);
      expect(cache.read(0, cache.length)).toEqual(expected.encode(TEXT));
      cache.close();
    }
    const wide = Array.from({ length: 70_000 }, (_, i) => String.fromCodePoint(0x20000 + i)).join('') + '\n';
    const { cache } = await cachedTokens(source(wide, 4093), 'char', join(dir, 'wide'));
    expect(cache.header).toMatchObject({ idBytes: 4, vocabSize: 70_001 });
    expect(cache.read(0, cache.length)).toEqual(vocabularyTokenizer(textVocabulary(wide, 'chars')).encode(wide));
    cache.close();
  });

  it('a damaged file is rebuilt, not read; a text that is not UTF-8 is refused', async () => {
    const text = 'the cat sat on the mat. '.repeat(200);
    const first = await cachedTokens(source(text, 100), 'gpt2', join(dir, 'damaged'));
    const count = first.cache.length;
    first.cache.close();
    truncateSync(first.cache.path, 100);
    const rebuilt = await cachedTokens(source(text, 100), 'gpt2', join(dir, 'damaged'));
    expect(rebuilt.built).toBeDefined();
    expect(rebuilt.cache.length).toBe(count);
    rebuilt.cache.close();
    writeFileSync(rebuilt.cache.path, 'not a cache at all');
    const again = await cachedTokens(source(text, 100), 'gpt2', join(dir, 'damaged'));
    expect([again.built !== undefined, again.cache.length]).toEqual([true, count]);
    again.cache.close();
    const latin1: TextSource = {
      ...source('x', 1),
      *pieces() {
        yield Uint8Array.of(0x63, 0x61, 0x66, 0xe9);
      },
    };
    await expect(cachedTokens(latin1, 'gpt2', join(dir, 'latin1'))).rejects.toThrow(
      '--text test text is not UTF-8 text; convert it first',
    );
    expect(readdirSync(join(dir, 'latin1'))).toEqual([]); // no half-written file left behind
  });

  it('two processes that build the same cache at once leave one whole file and no temporary one', async () => {
    const text = join(dir, 'shared.txt');
    writeFileSync(text, TEXT);
    const cacheDir = join(dir, 'shared');
    const script = join(dir, 'build.mts'); // an ES module wherever the folder is
    const module = resolve('src/data/token-cache.node.ts');
    writeFileSync(
      script,
      `import { cachedTokens } from ${JSON.stringify(module)};\nimport { textSource } from ${JSON.stringify(resolve('src/data/text.node.ts'))};\nconst { cache } = await cachedTokens(textSource(${JSON.stringify(text)}), 'gpt2', ${JSON.stringify(cacheDir)});\nconsole.log(cache.length);\n`,
    );
    const run = () =>
      new Promise<string>((done, fail) => {
        const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('exit', (code) => (code === 0 ? done(out.trim()) : fail(new Error(`exit ${code}`))));
      });
    const counts = await Promise.all([run(), run()]);
    const expected = (await gpt2Tokenizer()).encode(TEXT);
    expect(counts).toEqual([String(expected.length), String(expected.length)]);
    expect(readdirSync(cacheDir)).toHaveLength(1);
    const { cache, built } = await cachedTokens(source(TEXT, 1 << 20), 'gpt2', cacheDir);
    expect(built).toBeUndefined();
    expect(cache.read(0, cache.length)).toEqual(expected);
    cache.close();
  }, 60_000);

  it('windows read from the cache cover the corpus: every training token is in a training window, validation windows do not overlap', async () => {
    const text = 'abcdefghij'.repeat(10);
    const { cache } = await cachedTokens(source(text, 7), 'char', join(dir, 'windows'));
    const ids = cache.read(0, cache.length);
    const s = splitTokens(cache, cache.header, 4, 'the text');
    expect([s.trainTokens, s.validationTokens, s.train.count, s.validation.count]).toEqual([90, 10, 86, 2]);
    const all = Uint32Array.from({ length: s.train.count }, (_, i) => i);
    const { inputs, labels } = gatherExamples(s.train, all);
    const seen = new Set<number>();
    for (let i = 0; i < s.train.count; i++) {
      for (let t = 0; t < 4; t++) {
        expect([inputs[i * 4 + t], labels[i * 4 + t]]).toEqual([ids[i + t], ids[i + t + 1]]);
        seen.add(i + t).add(i + t + 1);
      }
    }
    expect(seen.size).toBe(s.trainTokens);
    const v = gatherExamples(s.validation, [0, 1]);
    expect(Array.from(v.inputs)).toEqual(Array.from(ids.subarray(90, 98)));
    expect(Array.from(v.labels)).toEqual(Array.from(ids.subarray(91, 99)));
    cache.close();
  });
});
