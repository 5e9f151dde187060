/** `data` under Node and Deno: everything of data.ts, plus the loaders that read files. */
export * from './data.ts';
export { loadMnist } from '../data/mnist.node.ts';
export { loadIdxDataset, loadIdxSplit } from '../data/idx.node.ts';
export { loadWords } from '../data/words.node.ts';
export { textSource, type TextSource } from '../data/text.node.ts';
export { cachedTokens, tokenCacheDir, TokenCache, type CachedTokens } from '../data/token-cache.node.ts';
