/**
 * The tokenizers: GPT-2's ids for known strings (as tiktoken's r50k_base and
 * Hugging Face's GPT2Tokenizer give them), a real text that decodes back to
 * itself, char and byte as the text data always had them, what a checkpoint
 * records, and a resume with another tokenizer refused naming both.
 */
import { describe, expect, it } from 'vitest';
import { loadText } from '../../src/data/text.node.ts';
import { textVocabulary } from '../../src/data/text.ts';
import {
  describeRecord,
  GPT2_VOCAB_SIZE,
  gpt2Tokenizer,
  recordName,
  tokenizerFromRecord,
  tokenizerMetadata,
  vocabularyTokenizer,
} from '../../src/data/tokenizer.ts';
import { checkVocabulary, resumeTokenizer } from '../../src/distributed/train/model-fit.ts';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';

describe('tokenizers', () => {
  it('gpt2: the ids GPT-2 gives known strings, 50,257 tokens', async () => {
    const t = await gpt2Tokenizer();
    expect(t.vocabSize).toBe(GPT2_VOCAB_SIZE);
    expect(Array.from(t.encode('Hello world'))).toEqual([15496, 995]);
    expect(Array.from(t.encode(' Hello'))).toEqual([18435]);
    expect(Array.from(t.encode('\n'))).toEqual([198]);
    expect(Array.from(t.encode("It's"))).toEqual([1026, 338]);
    expect(t.decode([15496, 11, 995, 0])).toBe('Hello, world!');
    expect(t.decode([50256])).toBe('<|endoftext|>');
    // A file's "<|endoftext|>" is ordinary text, not the control token.
    expect(Array.from(t.encode('<|endoftext|>'))).not.toContain(50256);
    expect(t.decode(t.encode('a<|endoftext|>b'))).toBe('a<|endoftext|>b');
    expect(() => t.decode([GPT2_VOCAB_SIZE])).toThrow(
      `token id ${GPT2_VOCAB_SIZE} (at 0) is outside GPT-2's vocabulary 0..50256`,
    );
  });

  it('gpt2: a real text (the first 300 KB of the Brown corpus, and other scripts) decodes back to itself', async () => {
    const t = await gpt2Tokenizer();
    const brown = loadText('@brown').text.slice(0, 300_000);
    const ids = t.encode(brown);
    expect(ids.length).toBeGreaterThan(50_000);
    expect(ids.length).toBeLessThan(100_000); // English: about 4 characters a token
    expect(t.decode(ids)).toBe(brown);
    const mixed = 'naïve café — 日本語のテキスト, Ελληνικά, emoji 🎉🧪\r\n\ttabs  and   spaces\n\n';
    expect(t.decode(t.encode(mixed))).toBe(mixed);
  });

  it('char and byte: the vocabularies the text data always had, recorded as before', async () => {
    const text = 'héllo wörld\n';
    const char = vocabularyTokenizer(textVocabulary(text));
    expect(char.name).toBe('char');
    expect(char.vocabSize).toBe(10);
    expect(char.record).toBe(
      JSON.stringify({ tokens: 'chars', symbols: [...'\n dhlorwéö'].map((c) => c.codePointAt(0)) }),
    );
    const byte = vocabularyTokenizer(textVocabulary(text, 'bytes'));
    expect(byte.name).toBe('byte');
    expect(byte.vocabSize).toBe(new Set(new TextEncoder().encode(text)).size);
    expect(byte.decode(byte.encode(text))).toBe(text);
    for (const t of [char, byte, await gpt2Tokenizer()]) {
      const back = await tokenizerFromRecord(t.record);
      expect([back.name, back.vocabSize, back.decode(back.encode(text))]).toEqual([t.name, t.vocabSize, text]);
      expect(recordName(t.record)).toBe(t.name);
    }
    expect(tokenizerMetadata((await gpt2Tokenizer()).record)).toEqual({
      vocabulary: '{"tokens":"gpt2"}',
      tokenizer: '{"name":"gpt2","vocab_size":50257}',
    });
    expect(JSON.parse(tokenizerMetadata(char.record).tokenizer)).toEqual({ name: 'char', vocab_size: 10 });
    expect(tokenizerMetadata(undefined)).toEqual({});
    expect(describeRecord(char.record)).toBe('the char tokenizer (10 characters "\\n dhlorwéö")');
  });

  it("a resume takes the checkpoint's tokenizer; another one is refused, naming both", async () => {
    const gpt2 = (await gpt2Tokenizer()).record;
    const char = vocabularyTokenizer(textVocabulary('abc\n')).record;
    const saved = { extra: { vocabulary: gpt2 } };
    expect(resumeTokenizer(undefined, saved, 'g.safetensors')).toBe('gpt2');
    expect(resumeTokenizer('gpt2', saved, 'g.safetensors')).toBe('gpt2');
    expect(resumeTokenizer('char', undefined)).toBe('char');
    // A checkpoint from before tokenizers were named reads as char (or byte): what it was trained with.
    expect(resumeTokenizer(undefined, { extra: { vocabulary: char } })).toBe('char');
    expect(() => resumeTokenizer('char', saved, 'g.safetensors')).toThrow(
      'g.safetensors was trained with the gpt2 tokenizer (50,257 tokens), but this run asks for --tokenizer char: its token ids would mean other tokens',
    );
    const ckpt = { extra: { vocabulary: gpt2 } } as unknown as TrainingCheckpoint;
    expect(() => checkVocabulary(ckpt, { vocabulary: char }, 'g.safetensors')).toThrow(
      'g.safetensors was trained with the gpt2 tokenizer (50,257 tokens), but this run tokenizes its --text with the char tokenizer (4 characters "\\nabc"): its token ids would mean other tokens; resume with --tokenizer gpt2.',
    );
    expect(() => checkVocabulary(ckpt, { vocabulary: gpt2 }, 'g.safetensors')).not.toThrow();
  });
});
