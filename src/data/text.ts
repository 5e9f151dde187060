/**
 * The char and byte vocabularies of a text (tokenizer.ts names them `char`
 * and `byte`), and how a text file's bytes become its text.
 *
 * Vocabulary: the text's distinct characters (Unicode code points), sorted by
 * code point, so the same bytes always give the same ids on every peer and in
 * every runtime. Without a named tokenizer, a text of more than MAX_CHAR_VOCAB
 * distinct characters (most CJK text) falls back to its UTF-8 bytes as tokens
 * instead (at most 256): an embedding table of tens of thousands of rare
 * characters would mostly train nothing, and bytes always cover the text. The
 * vocabulary travels with the model (a checkpoint's `vocabulary` metadata, see
 * vocabularyJson), so sampling and resuming decode and encode exactly as
 * training did. How a text becomes training and validation windows:
 * text-split.ts.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** Beyond this many distinct characters the tokens are UTF-8 bytes. */
export const MAX_CHAR_VOCAB = 256;
/** Tokens per window of a text when --context is not given. */
export const DEFAULT_TEXT_CONTEXT = 64;

export interface TextVocabulary {
  /** 'chars': symbols are Unicode code points; 'bytes': symbols are UTF-8 byte values. */
  tokens: 'chars' | 'bytes';
  /** Token id i stands for symbols[i] (ascending). */
  symbols: number[];
}

/** The vocabulary of a text: its sorted characters, or its bytes beyond MAX_CHAR_VOCAB characters. */
export function textVocabulary(text: string, tokens?: TextVocabulary['tokens']): TextVocabulary {
  const seen = new Set<number>();
  for (const ch of text) seen.add(ch.codePointAt(0)!);
  return vocabularyOf(seen, tokens);
}

/**
 * The vocabulary of a text from its distinct code points (what a pass over a
 * file in pieces collects): `tokens` forces characters or bytes, else
 * characters up to MAX_CHAR_VOCAB of them. A text's distinct bytes are those
 * of its distinct characters' UTF-8 forms, so no second pass is needed.
 */
export function vocabularyOf(codePoints: ReadonlySet<number>, tokens?: TextVocabulary['tokens']): TextVocabulary {
  if (codePoints.size === 0)
    throw new RingtrainError(ErrorCode.BadData, 'the text is empty; give a file with some text in it.');
  if (tokens === 'chars' || (tokens === undefined && codePoints.size <= MAX_CHAR_VOCAB))
    return { tokens: 'chars', symbols: [...codePoints].sort((a, b) => a - b) };
  const bytes = new Set<number>();
  const utf8 = new TextEncoder();
  for (const c of codePoints) for (const b of utf8.encode(String.fromCodePoint(c))) bytes.add(b);
  return { tokens: 'bytes', symbols: [...bytes].sort((a, b) => a - b) };
}

/** Token ids of `text` in `vocab`; a symbol outside it is refused, naming it. */
export function encodeText(text: string, vocab: TextVocabulary): Uint32Array {
  const id = new Map(vocab.symbols.map((s, i) => [s, i]));
  const units: Iterable<number> =
    vocab.tokens === 'bytes'
      ? new TextEncoder().encode(text)
      : (function* () {
          for (const ch of text) yield ch.codePointAt(0)!;
        })();
  // Code points never outnumber UTF-16 code units; bytes are counted exactly.
  const out = new Uint32Array(units instanceof Uint8Array ? units.length : text.length);
  let n = 0;
  for (const s of units) {
    const i = id.get(s);
    if (i === undefined) {
      const shown =
        vocab.tokens === 'bytes'
          ? `byte 0x${s.toString(16)}`
          : `${JSON.stringify(String.fromCodePoint(s))} (U+${s.toString(16).toUpperCase().padStart(4, '0')})`;
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${shown} is not in the model's vocabulary of ${vocab.symbols.length} ${vocab.tokens}; use only characters of the text it was trained on.`,
        { symbol: s },
      );
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
  if (
    !o ||
    (o.tokens !== 'chars' && o.tokens !== 'bytes') ||
    !Array.isArray(symbols) ||
    symbols.length === 0 ||
    !symbols.every((s, i) => Number.isInteger(s) && s >= 0 && (i === 0 || s > symbols[i - 1]))
  ) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file}: its 'vocabulary' metadata is not a vocabulary ({"tokens":"chars"|"bytes","symbols":[ascending code points]}).`,
      { file },
    );
  }
  return { tokens: o.tokens, symbols: symbols as number[] };
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
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what} is not UTF-8 text; convert it first (iconv -t UTF-8)`,
      {},
      { cause: err },
    );
  }
  return text.startsWith('\ufeff') ? text.slice(1) : text;
}
