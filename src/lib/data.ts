/** `data`: datasets, batching and sharding by rank; runs in every runtime (the loaders that read files are in data.node.ts). */
export {
  IGNORE_LABEL,
  makeDataset,
  makeImageDataset,
  gatherExamples,
  selectExamples,
  countedTargets,
  isImageDataset,
  type Dataset,
  type ImageDataset,
} from '../data/dataset.ts';
export {
  batches,
  batchOf,
  batchCount,
  epochOrder,
  drawWithReplacement,
  rankShareOfDraw,
  type Batch,
  type BatchOptions,
} from '../data/batches.ts';
export { DistributedSampler, type ShardOptions } from '../data/sampler.ts';
export { equalShares, rankBatch, testShard, stepsPerEpoch, type GlobalStep } from '../data/global-batch.ts';
export { parseIdx, idxDataset, type IdxArray } from '../data/idx.ts';
export { mnistFromDigits, loadMnistWith, MNIST_PIXELS, MNIST_CLASSES, type MnistSplit } from '../data/mnist.ts';
export {
  wordsDataset,
  wordsFromDictionaryText,
  encodeWord,
  decodeWord,
  WORD_VOCAB,
  WORD_CONTEXT,
  type WordsSplit,
} from '../data/words.ts';
export { permutation, mixSeed } from '../data/random.ts';
export {
  textVocabulary,
  encodeText,
  decodeText,
  decodeTextFile,
  DEFAULT_TEXT_CONTEXT,
  type TextVocabulary,
} from '../data/text.ts';
export { textSplit, splitTokens, VALIDATION_FRACTION, type TextSplit } from '../data/text-split.ts';
export {
  gpt2Tokenizer,
  vocabularyTokenizer,
  tokenizerFromRecord,
  TOKENIZER_NAMES,
  GPT2_VOCAB_SIZE,
  type Tokenizer,
  type TokenizerName,
} from '../data/tokenizer.ts';
export { type TokenStream } from '../data/dataset.ts';
