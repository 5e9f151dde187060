/**
 * A language-model data set from a text's token ids, whatever the tokenizer,
 * and wherever the ids are: in memory (a tab, a small text) or in a cache
 * file read a window at a time (token-cache.node.ts).
 *
 * Split: the last VALIDATION_FRACTION of the tokens is the validation text,
 * the rest the training text; a split by position, not by random windows, so
 * no validation window overlaps a training one.
 *
 * Examples: training example i is the window starting at token i: tokens
 * [i, i + context) in, [i + 1, i + context + 1) as targets (next token at
 * every position). All of them are valid, overlapping, and drawn at random
 * with replacement from the seed and step (batches.ts), so the windows are
 * never materialised: the data set keeps the token stream (`stream`) and a
 * batch copies its windows out (gatherExamples). Validation windows do not
 * overlap (start k · context), so every validation token is predicted once.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type Dataset, selectExamples, type TokenStream } from './dataset.ts';
import { textVocabulary } from './text.ts';
import { type Tokenizer, type TokenizerName, vocabularyTokenizer } from './tokenizer.ts';

/** The last tenth of the text is held out. */
export const VALIDATION_FRACTION = 0.1;

/** What a split says of its tokenizer (a cache file knows this without loading the tokenizer). */
export type TokenizerInfo = Pick<Tokenizer, 'name' | 'vocabSize' | 'record'>;

export interface TextSplit {
  tokenizer: TokenizerInfo;
  train: Dataset;
  validation: Dataset;
  /** Tokens in each part. */
  trainTokens: number;
  validationTokens: number;
}

/** Tokens [from, to) of a stream as a stream of their own. */
export function streamPart(stream: Uint32Array | TokenStream, from: number, to: number): Uint32Array | TokenStream {
  if (stream instanceof Uint32Array) return stream.subarray(from, to);
  return { length: to - from, read: (start, end) => stream.read(from + start, from + end) };
}

/** How many tokens of `n` train: all but the last VALIDATION_FRACTION. */
export function trainingTokens(n: number): number {
  return n - Math.floor(n * VALIDATION_FRACTION);
}

/** What a tokenizer's units are called in a message. */
function unitsOf(name: TokenizerName): string {
  return name === 'char' ? 'characters' : name === 'byte' ? 'bytes' : 'tokens';
}

/** Training windows at every token and validation windows that do not overlap, of `ids` (see the file's comment). */
export function splitTokens(
  ids: Uint32Array | TokenStream,
  tokenizer: TokenizerInfo,
  context: number,
  what: string,
): TextSplit {
  if (!Number.isInteger(context) || context < 2)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--context must be a whole number of at least 2, got ${context}`,
      { context },
    );
  const trainTokens = trainingTokens(ids.length);
  const validationTokens = ids.length - trainTokens;
  // A training window needs context + 1 tokens, and one more to draw from; a validation window context + 1.
  if (trainTokens < context + 2 || validationTokens < context + 1) {
    const need = Math.ceil((context + 2) / (1 - VALIDATION_FRACTION));
    const atLeast = Math.max(need, Math.ceil((context + 1) / VALIDATION_FRACTION));
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what} has ${ids.length} ${unitsOf(tokenizer.name)}: too few for windows of --context ${context} (the last ${VALIDATION_FRACTION * 100}% is the validation text; at least ${atLeast} are needed). Use a longer text or a smaller --context.`,
      { tokens: ids.length, context },
    );
  }
  const classes = tokenizer.vocabSize;
  const vocabulary = tokenizer.record;
  const common = {
    inputs: new Float32Array(0),
    inputSize: context,
    labels: new Int32Array(0),
    positions: context,
    classes,
    vocabulary,
  };
  return {
    tokenizer,
    train: { ...common, count: trainTokens - context, stream: streamPart(ids, 0, trainTokens) },
    validation: {
      ...common,
      count: Math.floor((validationTokens - 1) / context),
      stream: streamPart(ids, trainTokens, ids.length),
      stride: context,
    },
    trainTokens,
    validationTokens,
  };
}

/**
 * Training and validation sets of a text in memory, windows of `context`
 * tokens; without a tokenizer, the text's own characters (or bytes). The
 * validation windows are materialised (a tab evaluates and prompts from them).
 */
export function textSplit(
  text: string,
  context: number,
  what = 'the text',
  tokenizer: Tokenizer = vocabularyTokenizer(textVocabulary(text)),
): TextSplit {
  const split = splitTokens(tokenizer.encode(text), tokenizer, context, what);
  const v = split.validation;
  const ids = Uint32Array.from({ length: v.count }, (_, i) => i);
  return { ...split, validation: selectExamples(v, ids) };
}
