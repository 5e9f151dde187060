/**
 * Node and Deno: a text's token ids, cached in a binary file and read a
 * window at a time, so that a text of any size trains in the memory of a
 * batch, not of the corpus.
 *
 * The file (`<cache dir>/<text's SHA-256>-<tokenizer>.tokens`):
 *   0   "RTTOKENS"                 magic
 *   8   u32 version (1)            little-endian, as every number here
 *   12  u32 bytes per id           2 when the vocabulary has at most 65,536 tokens, else 4
 *   16  u64 count                  token ids in the file
 *   24  u32 header length          of the JSON that follows
 *   28  JSON                       {tokenizer: its record, name, vocab_size, source_sha256, source_bytes}
 *   …   zero padding to a multiple of 8, then count ids
 * A file whose header, source hash or size does not add up is rebuilt, never
 * read. It is written to a temporary file beside it and renamed into place
 * when complete, so a reader sees a whole file or none, and two workers that
 * tokenize the same text at once each rename a complete, identical file.
 *
 * Tokenizing reads the text in pieces and encodes it in chunks cut just
 * before a whitespace character that follows a non-whitespace one. GPT-2's
 * pre-tokenizer never spans such a cut (its pieces are whitespace alone, or
 * start with at most one space), so BPE merges never cross a chunk and the
 * ids are those of the whole text encoded at once. Only a run of more than
 * MAX_UNCUT characters without whitespace is cut inside (then merges may
 * differ at that one cut). char and byte need the text's vocabulary first:
 * one more pass collects its distinct characters.
 *
 * The cache folder: $RINGTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/ringtrain,
 * else ~/.cache/ringtrain; the files are safe to delete at any time.
 */
import { closeSync, fstatSync, fsyncSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { TokenStream } from './dataset.ts';
import { vocabularyOf } from './text.ts';
import type { TextSource } from './text.node.ts';
import type { TokenizerInfo } from './text-split.ts';
import { gpt2Tokenizer, recordName, type Tokenizer, type TokenizerName, vocabularyTokenizer } from './tokenizer.ts';

const MAGIC = 'RTTOKENS';
const VERSION = 1;
/** Bytes before the JSON header. */
const FIXED_HEADER = 28;
/** Bytes of text read at a time: a few MiB keeps the pieces cheap and the memory flat. */
const PIECE_BYTES = 4 << 20;
/** Characters without a safe cut after which a chunk is cut anyway (a text with no whitespace at all). */
export const MAX_UNCUT = 1 << 22;

export interface CacheHeader extends TokenizerInfo {
  count: number;
  idBytes: 2 | 4;
  sourceSha256: string;
  sourceBytes: number;
}

/** The folder the caches go in (see the file's comment). */
export function tokenCacheDir(): string {
  const env = process.env;
  if (env.RINGTRAIN_CACHE_DIR) return env.RINGTRAIN_CACHE_DIR;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'ringtrain');
}

/** A cache file open for reading: its ids by position, read from the file on demand. */
export class TokenCache implements TokenStream {
  constructor(
    readonly path: string,
    readonly header: CacheHeader,
    private readonly fd: number,
    private readonly dataOffset: number,
  ) {}

  get length(): number {
    return this.header.count;
  }

  read(start: number, end: number): Uint32Array {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= this.length)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `tokens [${start}, ${end}) are outside the ${this.length} of ${this.path}`,
        { start, end },
      );
    }
    const bytes = new Uint8Array((end - start) * this.header.idBytes);
    readFully(this.fd, bytes, this.dataOffset + start * this.header.idBytes, this.path);
    return this.header.idBytes === 2 ? Uint32Array.from(new Uint16Array(bytes.buffer)) : new Uint32Array(bytes.buffer);
  }

  close(): void {
    closeSync(this.fd);
  }
}

function readFully(fd: number, into: Uint8Array, position: number, path: string): void {
  let done = 0;
  while (done < into.length) {
    const n = readSync(fd, into, done, into.length - done, position + done);
    if (n === 0)
      throw new RingtrainError(ErrorCode.BadData, `${path} ended early; delete it (it is a cache) and run again`, {
        path,
      });
    done += n;
  }
}

export interface CachedTokens {
  cache: TokenCache;
  /** Set when this call tokenized the text (no valid cache was there). */
  built?: { seconds: number };
}

/** The text's tokens with `tokenizer` (undefined: its characters, or bytes past 256 of them), from the cache or tokenized into it now. */
export async function cachedTokens(
  source: TextSource,
  tokenizer: TokenizerName | undefined,
  dir = tokenCacheDir(),
): Promise<CachedTokens> {
  const path = join(dir, `${source.sha256}-${tokenizer ?? 'auto'}.tokens`);
  const found = openCache(path, source, tokenizer);
  if (found) return { cache: found };
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot create the token cache folder ${dir} (${(err as { code?: string }).code ?? String(err)}); set RINGTRAIN_CACHE_DIR to a folder you can write`,
      { dir },
      { cause: err },
    );
  }
  const started = performance.now();
  await writeCache(path, source, tokenizer);
  const cache = openCache(path, source, tokenizer);
  if (!cache)
    throw new RingtrainError(
      ErrorCode.BadData,
      `${path} was written but does not read back; is another program changing ${dir}?`,
      { path },
    );
  return { cache, built: { seconds: (performance.now() - started) / 1000 } };
}

/** The cache at `path` when it is whole and of this text and tokenizer, else undefined. */
function openCache(path: string, source: TextSource, tokenizer: TokenizerName | undefined): TokenCache | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  const header = readHeader(fd, path);
  const fits =
    header &&
    header.h.sourceSha256 === source.sha256 &&
    header.h.sourceBytes === source.size &&
    (tokenizer === undefined || header.h.name === tokenizer) &&
    fstatSync(fd).size === header.dataOffset + header.h.count * header.h.idBytes;
  if (!fits) {
    closeSync(fd);
    return undefined;
  }
  return new TokenCache(path, header.h, fd, header.dataOffset);
}

function readHeader(fd: number, path: string): { h: CacheHeader; dataOffset: number } | undefined {
  try {
    const fixed = new Uint8Array(FIXED_HEADER);
    readFully(fd, fixed, 0, path);
    const view = new DataView(fixed.buffer);
    if (new TextDecoder().decode(fixed.subarray(0, 8)) !== MAGIC || view.getUint32(8, true) !== VERSION)
      return undefined;
    const idBytes = view.getUint32(12, true);
    const count = Number(view.getBigUint64(16, true));
    const json = new Uint8Array(view.getUint32(24, true));
    readFully(fd, json, FIXED_HEADER, path);
    const j = JSON.parse(new TextDecoder().decode(json)) as {
      tokenizer: string;
      vocab_size: number;
      source_sha256: string;
      source_bytes: number;
    };
    if ((idBytes !== 2 && idBytes !== 4) || typeof j.tokenizer !== 'string') return undefined;
    const h: CacheHeader = {
      name: recordName(j.tokenizer),
      record: j.tokenizer,
      vocabSize: j.vocab_size,
      count,
      idBytes,
      sourceSha256: j.source_sha256,
      sourceBytes: j.source_bytes,
    };
    return { h, dataOffset: padded(FIXED_HEADER + json.length) };
  } catch {
    return undefined;
  }
}

function padded(n: number): number {
  return Math.ceil(n / 8) * 8;
}

function headerBytes(t: TokenizerInfo, idBytes: number, source: TextSource): Uint8Array {
  const json = new TextEncoder().encode(
    JSON.stringify({
      tokenizer: t.record,
      name: t.name,
      vocab_size: t.vocabSize,
      source_sha256: source.sha256,
      source_bytes: source.size,
    }),
  );
  const out = new Uint8Array(padded(FIXED_HEADER + json.length));
  out.set(new TextEncoder().encode(MAGIC), 0);
  const view = new DataView(out.buffer);
  view.setUint32(8, VERSION, true);
  view.setUint32(12, idBytes, true);
  view.setUint32(24, json.length, true);
  out.set(json, FIXED_HEADER);
  return out;
}

/** Tokenizes the text into a temporary file and renames it to `path` (see the file's comment). */
async function writeCache(path: string, source: TextSource, name: TokenizerName | undefined): Promise<void> {
  const tokenizer =
    name === 'gpt2'
      ? await gpt2Tokenizer()
      : vocabularyTokenizer(
          vocabularyOf(codePointsOf(source), name === undefined ? undefined : name === 'char' ? 'chars' : 'bytes'),
        );
  const idBytes = tokenizer.vocabSize <= 65536 ? 2 : 4;
  const temporary = `${path}.${process.pid}-${Math.random().toString(36).slice(2, 10)}.tmp`;
  const fd = openSync(temporary, 'wx');
  try {
    const header = headerBytes(tokenizer, idBytes, source);
    writeSync(fd, header);
    let count = 0;
    for (const ids of encodedChunks(source, tokenizer)) {
      const packed = idBytes === 2 ? Uint16Array.from(ids) : ids;
      writeSync(fd, new Uint8Array(packed.buffer, packed.byteOffset, packed.byteLength));
      count += ids.length;
    }
    const n = new Uint8Array(8);
    new DataView(n.buffer).setBigUint64(0, BigInt(count), true);
    writeSync(fd, n, 0, 8, 16);
    fsyncSync(fd);
    closeSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw err;
  }
  renameSync(temporary, path);
}

/** The text's pieces decoded as strict UTF-8, without a leading byte-order mark (as text.ts decodeTextFile reads a whole file). */
function* decodedPieces(source: TextSource): Generator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let first = true;
  try {
    for (const piece of source.pieces(PIECE_BYTES)) {
      let s = decoder.decode(piece, { stream: true });
      if (first && s.length > 0) {
        if (s.startsWith('\ufeff')) s = s.slice(1);
        first = false;
      }
      yield s;
    }
    yield decoder.decode();
  } catch (err) {
    if (err instanceof RingtrainError) throw err;
    throw new RingtrainError(
      ErrorCode.BadData,
      `--text ${source.name} is not UTF-8 text; convert it first (iconv -t UTF-8)`,
      {},
      { cause: err },
    );
  }
}

function codePointsOf(source: TextSource): Set<number> {
  const seen = new Set<number>();
  for (const s of decodedPieces(source)) for (const ch of s) seen.add(ch.codePointAt(0)!);
  return seen;
}

/** Where `s` may be cut so that no GPT-2 pre-token spans the cut (0: nowhere), see the file's comment. */
export function lastSafeCut(s: string): number {
  for (let i = s.length - 1; i > 0; i--) if (isSpace(s.charCodeAt(i)) && !isSpace(s.charCodeAt(i - 1))) return i;
  return 0;
}

const SPACE = /\s/;
function isSpace(code: number): boolean {
  return SPACE.test(String.fromCharCode(code));
}

/** The text's ids, chunk by chunk, each chunk cut where it does not change them. */
function* encodedChunks(source: TextSource, tokenizer: Tokenizer): Generator<Uint32Array> {
  let pending = '';
  for (const s of decodedPieces(source)) {
    pending += s;
    let cut = lastSafeCut(pending);
    if (cut === 0 && pending.length > MAX_UNCUT) cut = endOfWholeCharacters(pending);
    if (cut === 0) continue;
    yield tokenizer.encode(pending.slice(0, cut));
    pending = pending.slice(cut);
  }
  if (pending.length > 0) yield tokenizer.encode(pending);
}

/** The string's length, less a high surrogate at its end (never cut a character in two). */
function endOfWholeCharacters(s: string): number {
  const last = s.charCodeAt(s.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? s.length - 1 : s.length;
}
