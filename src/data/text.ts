/**
 * A character-level language-model data set from any UTF-8 text.
 *
 * Vocabulary: the text's distinct characters (Unicode code points), sorted by
 * code point, so the same bytes always give the same ids on every peer and in
 * every runtime. A text of more than MAX_CHAR_VOCAB distinct characters (most
 * CJK text) falls back to its UTF-8 bytes as tokens instead (at most 256): an
 * embedding table of tens of thousands of rare characters would mostly train
 * nothing, and bytes always cover the text. The vocabulary travels with the
 * model (a checkpoint's `vocabulary` metadata, see vocabularyJson), so
 * sampling and resuming decode and encode exactly as training did.
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
import type { Dataset } from './dataset.ts';

/** Beyond this many distinct characters the tokens are UTF-8 bytes. */
export const MAX_CHAR_VOCAB = 256;
/** The last tenth of the text is held out. */
export const VALIDATION_FRACTION = 0.1;
export const DEFAULT_TEXT_CONTEXT = 64;

export interface TextVocabulary {
  /** 'chars': symbols are Unicode code points; 'bytes': symbols are UTF-8 byte values. */
  tokens: 'chars' | 'bytes';
  /** Token id i stands for symbols[i] (ascending). */
  symbols: number[];
}

export interface TextSplit {
  vocabulary: TextVocabulary;
  train: Dataset;
  validation: Dataset;
  /** Tokens in each part. */
  trainTokens: number;
  validationTokens: number;
}

/** The vocabulary of a text: its sorted characters, or its bytes beyond MAX_CHAR_VOCAB characters. */
export function textVocabulary(text: string): TextVocabulary {
  const seen = new Set<number>();
  for (const ch of text) seen.add(ch.codePointAt(0)!);
  if (seen.size === 0) throw new RingtrainError(ErrorCode.BadData, 'the text is empty; give a file with some text in it.');
  if (seen.size <= MAX_CHAR_VOCAB) return { tokens: 'chars', symbols: [...seen].sort((a, b) => a - b) };
  const bytes = new Set(new TextEncoder().encode(text));
  return { tokens: 'bytes', symbols: [...bytes].sort((a, b) => a - b) };
}

/** Token ids of `text` in `vocab`; a symbol outside it is refused, naming it. */
export function encodeText(text: string, vocab: TextVocabulary): Uint32Array {
  const id = new Map(vocab.symbols.map((s, i) => [s, i]));
  const units: Iterable<number> = vocab.tokens === 'bytes' ? new TextEncoder().encode(text) : (function* () {
    for (const ch of text) yield ch.codePointAt(0)!;
  })();
  // Code points never outnumber UTF-16 code units; bytes are counted exactly.
  const out = new Uint32Array(units instanceof Uint8Array ? units.length : text.length);
  let n = 0;
  for (const s of units) {
    const i = id.get(s);
    if (i === undefined) {
      const shown = vocab.tokens === 'bytes' ? `byte 0x${s.toString(16)}` : `${JSON.stringify(String.fromCodePoint(s))} (U+${s.toString(16).toUpperCase().padStart(4, '0')})`;
      throw new RingtrainError(ErrorCode.InvalidArgument, `${shown} is not in the model's vocabulary of ${vocab.symbols.length} ${vocab.tokens}; use only characters of the text it was trained on.`, { symbol: s });
    }
    out[n++] = i;
  }
  return out.slice(0, n);
}

/** The text token ids stand for (bytes that end mid-character decode to U+FFFD). */
export function decodeText(ids: ArrayLike<number>, vocab: TextVocabulary): string {
  const symbols = Array.from(ids, (i) => vocab.symbols[i]);
  if (vocab.tokens === 'bytes') return new TextDecoder().decode(Uint8Array.from(symbols));
  return symbols.map((s) => String.fromCodePoint(s)).join('');
}

/** The vocabulary as a checkpoint's metadata records it (one JSON string). */
export function vocabularyJson(vocab: TextVocabulary): string {
  return JSON.stringify({ tokens: vocab.tokens, symbols: vocab.symbols });
}

/** A vocabulary back from its metadata string, checked. */
export function parseVocabulary(json: string, file = 'checkpoint'): TextVocabulary {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    v = undefined;
  }
  const o = v as { tokens?: unknown; symbols?: unknown } | undefined;
  const symbols = o?.symbols;
  if (!o || (o.tokens !== 'chars' && o.tokens !== 'bytes') || !Array.isArray(symbols) || symbols.length === 0 || !symbols.every((s, i) => Number.isInteger(s) && s >= 0 && (i === 0 || s > symbols[i - 1]))) {
    throw new RingtrainError(ErrorCode.BadCheckpoint, `${file}: its 'vocabulary' metadata is not a vocabulary ({"tokens":"chars"|"bytes","symbols":[ascending code points]}).`, { file });
  }
  return { tokens: o.tokens, symbols: symbols as number[] };
}

/** Windows starting at every token of `stream` (see the file's comment): inputs and labels come from the stream. */
function streamDataset(stream: Uint32Array, context: number, classes: number, vocabulary: string): Dataset {
  return { count: stream.length - context, inputs: new Float32Array(0), inputSize: context, labels: new Int32Array(0), positions: context, classes, stream, vocabulary };
}

/** Non-overlapping windows of `ids`, materialised (what evaluation reads). */
function windowsDataset(ids: Uint32Array, context: number, classes: number, vocabulary: string): Dataset {
  const count = Math.floor((ids.length - 1) / context);
  const inputs = new Float32Array(count * context);
  const labels = new Int32Array(count * context);
  for (let k = 0; k < count; k++) {
    for (let t = 0; t < context; t++) {
      inputs[k * context + t] = ids[k * context + t];
      labels[k * context + t] = ids[k * context + t + 1];
    }
  }
  return { count, inputs, inputSize: context, labels, positions: context, classes, vocabulary };
}

/** Training and validation sets of a text, windows of `context` tokens. */
export function textSplit(text: string, context = DEFAULT_TEXT_CONTEXT, what = 'the text'): TextSplit {
  if (!Number.isInteger(context) || context < 2) throw new RingtrainError(ErrorCode.InvalidArgument, `--context must be a whole number of at least 2, got ${context}`, { context });
  const vocabulary = textVocabulary(text);
  const ids = encodeText(text, vocabulary);
  const validationTokens = Math.floor(ids.length * VALIDATION_FRACTION);
  const trainTokens = ids.length - validationTokens;
  // A training window needs context + 1 tokens, and one more to draw from; a validation window context + 1.
  if (trainTokens < context + 2 || validationTokens < context + 1) {
    const need = Math.ceil((context + 2) / (1 - VALIDATION_FRACTION));
    const atLeast = Math.max(need, Math.ceil((context + 1) / VALIDATION_FRACTION));
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what} has ${ids.length} ${vocabulary.tokens === 'bytes' ? 'bytes' : 'characters'}: too few for windows of --context ${context} (the last ${VALIDATION_FRACTION * 100}% is the validation text; at least ${atLeast} are needed). Use a longer text or a smaller --context.`,
      { tokens: ids.length, context },
    );
  }
  const classes = vocabulary.symbols.length;
  const recorded = vocabularyJson(vocabulary);
  return {
    vocabulary,
    train: streamDataset(ids.slice(0, trainTokens), context, classes, recorded),
    validation: windowsDataset(ids.slice(trainTokens), context, classes, recorded),
    trainTokens,
    validationTokens,
  };
}

/**
 * A text file's bytes as its text: strict UTF-8 (a wrong encoding is refused,
 * not guessed), without a leading byte-order mark (no character of the text).
 * `what` names the file in the refusal. Every runtime reads a text through
 * this, so a tab that downloads a job's text builds the vocabulary a worker
 * that read the file did.
 */
export function decodeTextFile(bytes: Uint8Array, what: string): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    throw new RingtrainError(ErrorCode.BadData, `${what} is not UTF-8 text; convert it first (iconv -t UTF-8)`, {}, { cause: err });
  }
  return text.startsWith('\ufeff') ? text.slice(1) : text;
}
