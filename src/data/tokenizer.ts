/**
 * The tokenizers a text trains with (`--tokenizer char|byte|gpt2`), in every
 * runtime (Node, Deno, a browser tab):
 *   char  the text's distinct characters (Unicode code points), sorted;
 *   byte  the text's distinct UTF-8 byte values, sorted;
 *   gpt2  GPT-2's byte-level BPE (r50k_base, 50,257 tokens) from the npm
 *         package gpt-tokenizer (MIT), whose merge ranks ship inside it:
 *         nothing is downloaded. It is imported on first use (its ranks are
 *         half a megabyte of code), so a run without it never loads them.
 * Without --tokenizer a text keeps what it always had: its characters, or its
 * bytes past MAX_CHAR_VOCAB distinct characters (text.ts autoVocabulary).
 *
 * gpt2 encodes a text as ordinary text, as tiktoken's `encode_ordinary` and
 * nanoGPT's data preparation do: a literal "<|endoftext|>" in a file is its
 * 13 characters, not token 50256 (a file should not be able to inject a
 * control token). The model still has all 50,257 outputs, as GPT-2 has.
 *
 * A tokenizer's `record` is what a checkpoint keeps in its `vocabulary`
 * metadata: char and byte keep the format older checkpoints have
 * ({"tokens":"chars","symbols":[…]}), gpt2 is {"tokens":"gpt2"}. Two runs use
 * the same token ids exactly when their records are equal.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { decodeText, encodeText, parseVocabulary, vocabularyJson, type TextVocabulary } from './text.ts';

export const TOKENIZER_NAMES = ['char', 'byte', 'gpt2'] as const;
export type TokenizerName = (typeof TOKENIZER_NAMES)[number];
/** r50k_base: 50,000 merges, 256 byte tokens and <|endoftext|>. */
export const GPT2_VOCAB_SIZE = 50257;
const GPT2_RECORD = JSON.stringify({ tokens: 'gpt2' });

export interface Tokenizer {
  readonly name: TokenizerName;
  readonly vocabSize: number;
  /** Token ids of a text; char and byte refuse a symbol outside their vocabulary, naming it. */
  encode(text: string): Uint32Array;
  /** The text of token ids (bytes that end mid-character decode to U+FFFD). */
  decode(ids: ArrayLike<number>): string;
  /** What a checkpoint records (see the file's comment). */
  readonly record: string;
}

/** The char or byte tokenizer of a vocabulary (text.ts textVocabulary and friends). */
export function vocabularyTokenizer(v: TextVocabulary): Tokenizer {
  return {
    name: v.tokens === 'chars' ? 'char' : 'byte',
    vocabSize: v.symbols.length,
    encode: (text) => encodeText(text, v),
    decode: (ids) => decodeText(ids, v),
    record: vocabularyJson(v),
  };
}

let gpt2: Promise<Tokenizer> | undefined;

/** GPT-2's tokenizer (loaded once per process). */
export function gpt2Tokenizer(): Promise<Tokenizer> {
  gpt2 ??= import('gpt-tokenizer/encoding/r50k_base').then((bpe) => {
    if (bpe.vocabularySize !== GPT2_VOCAB_SIZE) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `the installed gpt-tokenizer has ${bpe.vocabularySize} tokens in r50k_base, not GPT-2's ${GPT2_VOCAB_SIZE}; reinstall it (npm ci)`,
      );
    }
    // An empty set of disallowed special tokens: every string is ordinary text (the file's comment).
    const ordinary = { disallowedSpecial: new Set<string>() };
    return {
      name: 'gpt2',
      vocabSize: GPT2_VOCAB_SIZE,
      encode: (text: string) => Uint32Array.from(bpe.encode(text, ordinary)),
      decode: (ids: ArrayLike<number>) => bpe.decode(checkedIds(ids, GPT2_VOCAB_SIZE)),
      record: GPT2_RECORD,
    } satisfies Tokenizer;
  });
  return gpt2;
}

function checkedIds(ids: ArrayLike<number>, size: number): number[] {
  const out = Array.from(ids);
  const bad = out.findIndex((i) => !Number.isInteger(i) || i < 0 || i >= size);
  if (bad >= 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `token id ${out[bad]} (at ${bad}) is outside GPT-2's vocabulary 0..${size - 1}`,
      { index: bad, id: out[bad] },
    );
  return out;
}

/** The tokenizer a checkpoint's (or a cache's) `vocabulary` record names. */
export async function tokenizerFromRecord(record: string, file = 'checkpoint'): Promise<Tokenizer> {
  if (record === GPT2_RECORD) return gpt2Tokenizer();
  return vocabularyTokenizer(parseVocabulary(record, file));
}

/** A tokenizer's name from its record, without loading it ('char' for anything that is not gpt2 or bytes). */
export function recordName(record: string): TokenizerName {
  if (record === GPT2_RECORD) return 'gpt2';
  try {
    return (JSON.parse(record) as { tokens?: unknown }).tokens === 'bytes' ? 'byte' : 'char';
  } catch {
    return 'char';
  }
}

/** How many tokens a record's tokenizer has (0 for a record that does not parse). */
function recordSize(record: string): number {
  if (record === GPT2_RECORD) return GPT2_VOCAB_SIZE;
  try {
    return (JSON.parse(record) as { symbols: unknown[] }).symbols.length;
  } catch {
    return 0;
  }
}

/**
 * What a checkpoint records of a text model's tokens: the record itself
 * (`vocabulary`, what resuming and sampling read) and, for a person and for
 * other tools, the tokenizer's name and size (`tokenizer`:
 * {"name":"gpt2","vocab_size":50257}). Nothing for a model without a text.
 */
export function tokenizerMetadata(record: string | undefined): Record<string, string> {
  if (record === undefined) return {};
  return {
    vocabulary: record,
    tokenizer: JSON.stringify({ name: recordName(record), vocab_size: recordSize(record) }),
  };
}

/** A record for a person: "the gpt2 tokenizer (50,257 tokens)", "the char tokenizer (85 characters "\n !…")". */
export function describeRecord(record: string): string {
  const name = recordName(record);
  if (name === 'gpt2') return `the gpt2 tokenizer (${GPT2_VOCAB_SIZE.toLocaleString('en-US')} tokens)`;
  try {
    const v = JSON.parse(record) as { symbols: number[] };
    const shown =
      name === 'byte'
        ? ''
        : ` ${JSON.stringify(String.fromCodePoint(...v.symbols.slice(0, 12)))}${v.symbols.length > 12 ? '…' : ''}`;
    return `the ${name} tokenizer (${v.symbols.length} ${name === 'byte' ? 'bytes' : 'characters'}${shown})`;
  } catch {
    return 'an unreadable vocabulary';
  }
}

/** `--tokenizer`'s value checked (undefined: the text's own default, see the file's comment). */
export function parseTokenizerName(raw: unknown, flag = '--tokenizer'): TokenizerName | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'string' && (TOKENIZER_NAMES as readonly string[]).includes(raw)) return raw as TokenizerName;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${flag} must be one of ${TOKENIZER_NAMES.join(', ')} (got ${JSON.stringify(raw)})`,
    { tokenizer: raw },
  );
}
