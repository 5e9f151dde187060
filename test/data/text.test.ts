/**
 * The text data set: a sorted, deterministic vocabulary (bytes past 256
 * characters), a split by position, and training windows read from the
 * token stream one next token per position.
 */
import { describe, expect, it } from 'vitest';
import { gatherExamples } from '../../src/data/dataset.ts';
import { batches } from '../../src/data/batches.ts';
import {
  decodeText,
  encodeText,
  MAX_CHAR_VOCAB,
  parseVocabulary,
  textVocabulary,
  vocabularyJson,
} from '../../src/data/text.ts';
import { textSplit } from '../../src/data/text-split.ts';
import { brownText } from '../../src/data/text.node.ts';

describe('text data', () => {
  it('vocabulary: the sorted characters, the same for the same text; ids round-trip', () => {
    const v = textVocabulary('héllo wörld\n');
    expect(String.fromCodePoint(...v.symbols)).toBe('\n dhlorwéö');
    expect(v.tokens).toBe('chars');
    expect(decodeText(encodeText('wörld', v), v)).toBe('wörld');
    expect(parseVocabulary(vocabularyJson(v))).toEqual(v);
    expect(() => encodeText('x', v)).toThrow(/"x" \(U\+0078\) is not in the model's vocabulary of 10 chars/);
  });

  it(`past ${MAX_CHAR_VOCAB} distinct characters the tokens are UTF-8 bytes`, () => {
    const text = Array.from({ length: 400 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join('');
    const v = textVocabulary(text);
    expect(v.tokens).toBe('bytes');
    expect(v.symbols.length).toBeLessThanOrEqual(256);
    expect(decodeText(encodeText(text, v), v)).toBe(text);
  });

  it('splits off the last tenth; a training window is the stream, targets shifted by one', () => {
    const text = 'abcdefghij'.repeat(10);
    const s = textSplit(text, 4);
    expect(s.trainTokens).toBe(90);
    expect(s.validationTokens).toBe(10);
    expect(s.train.count).toBe(86);
    const { inputs, labels } = gatherExamples(s.train, [0, 7]);
    expect(Array.from(inputs)).toEqual([0, 1, 2, 3, 7, 8, 9, 0]);
    expect(Array.from(labels)).toEqual([1, 2, 3, 4, 8, 9, 0, 1]);
    // Validation: windows that do not overlap, every target counted.
    expect(s.validation.count).toBe(2);
    expect(Array.from(s.validation.labels.subarray(0, 4))).toEqual([1, 2, 3, 4]);
    const [b] = batches(s.train, { batchSize: 3, seed: 1, replacement: true });
    expect(b.labels.length).toBe(12);
    expect(s.train.vocabulary).toBe(vocabularyJson(textVocabulary(text)));
    expect(() => textSplit('abc', 64)).toThrow(/has 3 characters: too few for windows of --context 64/);
  });

  it('Brown: tags dropped, quotes and punctuation put back', () => {
    const sample =
      "\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ,/, (/( they/ppss )/) ./.\n\n\n\tNext/ap one/cd ./.\n";
    expect(brownText([sample])).toBe('The jury said "no evidence", (they).\nNext one.\n');
  });
});
