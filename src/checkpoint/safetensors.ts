/**
 * The safetensors container: an 8-byte little-endian header length N, N bytes
 * of JSON (`{ "<tensor>": { "dtype", "shape", "data_offsets": [begin, end] },
 * "__metadata__": { string: string } }`), then the tensor bytes, little-endian,
 * offsets relative to the end of the header. We write F32 only, pad the header
 * with spaces so the data starts 8-byte aligned, and read with strict checks:
 * a checkpoint that is half-written or edited by hand fails here, by name.
 *
 * Integrity: next to each tensor we record the CRC-32 of its stored bytes in
 * the metadata (`"crc32:<tensor>": "1a2b3c4d"`; other safetensors readers
 * ignore unknown metadata), and verify it on read, so damaged data is refused
 * with the tensor's name instead of loading silently. Files without these
 * keys (written before they existed, or by other tools) still load; the
 * result says their data was not verified.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { crc32Hex } from './crc32.ts';

export interface Tensor {
  shape: number[];
  data: Float32Array;
}
export type NamedTensors = Record<string, Tensor>;
export type Metadata = Record<string, string>;

/** Whether a decoded file's tensor bytes were checked against recorded checksums. */
export type Integrity = 'verified' | 'unverified';

const METADATA_KEY = '__metadata__';
/** Metadata key prefix of a tensor's checksum: `crc32:<tensor name>`. */
export const CHECKSUM_PREFIX = 'crc32:';
/** Headers beyond this are not ours (and would make us allocate without bound on a corrupt length). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const BYTES_PER_F32 = 4;

function bad(file: string, what: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.BadCheckpoint, `${file}: ${what}`, { file, ...detail });
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export interface EncodeOptions {
  /** Record a CRC-32 per tensor in the metadata (default true; false writes the plain format, as older ringtrain did). */
  checksums?: boolean;
}

export function encodeSafetensors(
  tensors: NamedTensors,
  metadata: Metadata = {},
  options: EncodeOptions = {},
): Uint8Array {
  checkMetadata(metadata);
  // Each tensor's bytes first (little-endian), so their checksums can go into the header.
  const names = Object.keys(tensors);
  const blobs: Uint8Array[] = [];
  for (const name of names) {
    checkTensor(name, tensors[name]);
    const { data } = tensors[name];
    const blob = new Uint8Array(data.length * BYTES_PER_F32);
    const view = new DataView(blob.buffer);
    for (let i = 0; i < data.length; i++) view.setFloat32(i * BYTES_PER_F32, data[i], true);
    blobs.push(blob);
  }
  const headerBytes = headerOf(
    tensors,
    names.map((name, i) => ({ name, bytes: blobs[i].length, crc: crc32Hex(blobs[i]) })),
    metadata,
    options,
  );
  const offset = blobs.reduce((n, b) => n + b.length, 0);
  const out = new Uint8Array(headerBytes.length + offset);
  out.set(headerBytes, 0);
  let at = headerBytes.length;
  for (const blob of blobs) {
    out.set(blob, at);
    at += blob.length;
  }
  return out;
}

/**
 * The same file as encodeSafetensors, in pieces to write one after another: the header (its
 * 8-byte length, the JSON), then each tensor's bytes. On a little-endian machine (every one
 * WebGPU runs on) a tensor's piece is a view of its own array, so writing a file holds no copy
 * of it; elsewhere a piece is one tensor's copy at a time. Checksums are taken on the same views
 * first, so a caller holds at most the header and one tensor beyond the tensors themselves.
 */
export function* safetensorsPieces(
  tensors: NamedTensors,
  metadata: Metadata = {},
  options: EncodeOptions = {},
): Generator<Uint8Array> {
  checkMetadata(metadata);
  const names = Object.keys(tensors);
  for (const name of names) checkTensor(name, tensors[name]);
  const entries = names.map((name) => {
    const bytes = littleEndianBytes(tensors[name].data);
    return { name, bytes: bytes.length, crc: options.checksums === false ? '' : crc32Hex(bytes) };
  });
  yield headerOf(tensors, entries, metadata, options);
  for (const name of names) yield littleEndianBytes(tensors[name].data);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A float array's little-endian bytes: a view of it where the machine is little-endian, else a copy. */
function littleEndianBytes(data: Float32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.byteLength);
  const view = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) view.setFloat32(i * BYTES_PER_F32, data[i], true);
  return out;
}

function checkMetadata(metadata: Metadata): void {
  for (const k of Object.keys(metadata)) {
    if (k.startsWith(CHECKSUM_PREFIX))
      throw new RingtrainError(ErrorCode.InvalidArgument, `metadata key '${k}' is reserved for checksums.`, { key: k });
  }
}

function checkTensor(name: string, { shape, data }: Tensor): void {
  if (name === METADATA_KEY)
    throw new RingtrainError(ErrorCode.InvalidArgument, `'${METADATA_KEY}' is reserved and cannot name a tensor.`);
  if (!shape.every((d) => Number.isInteger(d) && d >= 0) || elementCount(shape) !== data.length) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `tensor '${name}': shape [${shape}] does not hold its ${data.length} values.`,
      { name, shape, length: data.length },
    );
  }
}

/** The 8-byte header length and the JSON header (padded with spaces so the data starts 8-byte aligned), tensors in the given order. */
function headerOf(
  tensors: NamedTensors,
  entries: { name: string; bytes: number; crc: string }[],
  metadata: Metadata,
  options: EncodeOptions,
): Uint8Array {
  const meta: Metadata = { ...metadata };
  if (options.checksums !== false) for (const e of entries) meta[CHECKSUM_PREFIX + e.name] = e.crc;
  const header: Record<string, unknown> = {};
  if (Object.keys(meta).length > 0) header[METADATA_KEY] = meta;
  let offset = 0;
  for (const e of entries) {
    header[e.name] = { dtype: 'F32', shape: tensors[e.name].shape, data_offsets: [offset, offset + e.bytes] };
    offset += e.bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + new TextEncoder().encode(json).length) % 8)) % 8);
  const jsonBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + jsonBytes.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(jsonBytes.length), true);
  out.set(jsonBytes, 8);
  return out;
}

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

function isEntry(v: unknown): v is HeaderEntry {
  const e = v as HeaderEntry;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.dtype === 'string' &&
    Array.isArray(e.shape) &&
    e.shape.every((d) => Number.isInteger(d) && d >= 0) &&
    Array.isArray(e.data_offsets) &&
    e.data_offsets.length === 2 &&
    e.data_offsets.every((d) => Number.isInteger(d) && d >= 0)
  );
}

/** Float formats a file from elsewhere may hold (Hugging Face's GPT-2 ships F32; F16 and BF16 copies are common); each is read into f32. */
const FLOAT_READERS: Record<string, { bytes: number; read: (view: DataView, at: number) => number }> = {
  F32: { bytes: 4, read: (v, at) => v.getFloat32(at, true) },
  F16: { bytes: 2, read: (v, at) => halfToFloat(v.getUint16(at, true)) },
  // bfloat16 is the top half of an f32.
  BF16: { bytes: 2, read: (v, at) => new Float32Array(new Uint32Array([v.getUint16(at, true) << 16]).buffer)[0] },
};

/** IEEE 754 binary16 to a number, subnormals, infinities and NaN included. */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

export interface DecodeOptions {
  /** Also read F16 and BF16 tensors (into f32), for weights from other tools; ringtrain's own files hold F32 only (the default). */
  halfFloats?: boolean;
}

/** Parses and validates a safetensors file; `file` names it in errors. */
export function decodeSafetensors(
  bytes: Uint8Array,
  file = 'checkpoint',
  options: DecodeOptions = {},
): { tensors: NamedTensors; metadata: Metadata; integrity: Integrity } {
  const { header, headerBytes } = readHeader(bytes, file);
  const { metadata, checksums } = splitMetadata(header, file);
  const data = bytes.subarray(8 + headerBytes);
  const tensors: NamedTensors = {};
  const spans: [number, number, string][] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === METADATA_KEY) continue;
    if (!isEntry(entry))
      throw bad(file, `tensor '${name}' has a malformed header entry (needs dtype, shape and data_offsets).`, {
        tensor: name,
      });
    const reader = entry.dtype === 'F32' || options.halfFloats ? FLOAT_READERS[entry.dtype] : undefined;
    if (!reader) {
      const held = options.halfFloats
        ? 'ringtrain reads F32, F16 or BF16 weights'
        : 'ringtrain checkpoints hold F32 only';
      throw bad(file, `tensor '${name}' has dtype ${entry.dtype}; ${held}.`, { tensor: name, dtype: entry.dtype });
    }
    const [begin, end] = entry.data_offsets;
    const count = elementCount(entry.shape);
    if (end - begin !== count * reader.bytes) {
      throw bad(
        file,
        `tensor '${name}': shape [${entry.shape}] needs ${count * reader.bytes} bytes but data_offsets span ${end - begin}.`,
        { tensor: name, shape: entry.shape },
      );
    }
    if (end > data.length) {
      throw bad(
        file,
        `tensor '${name}' ends at byte ${end} but the data section has ${data.length}: the file is truncated.`,
        { tensor: name, end, available: data.length },
      );
    }
    verifyChecksum(file, name, data.subarray(begin, end), checksums);
    const values = new Float32Array(count);
    const dv = new DataView(data.buffer, data.byteOffset + begin, end - begin);
    for (let i = 0; i < count; i++) values[i] = reader.read(dv, i * reader.bytes);
    tensors[name] = { shape: entry.shape, data: values };
    spans.push([begin, end, name]);
  }
  checkSpansTile(file, spans, data.length);
  for (const name of checksums.keys()) {
    if (!(name in tensors))
      throw bad(
        file,
        `metadata holds a checksum for tensor '${name}', which the file does not have: a tensor was removed after saving.`,
        { tensor: name },
      );
  }
  return { tensors, metadata, integrity: checksums.size > 0 ? 'verified' : 'unverified' };
}

/** The JSON header and its length in bytes, refused when the length passes the file or the JSON is not an object. */
function readHeader(bytes: Uint8Array, file: string): { header: Record<string, unknown>; headerBytes: number } {
  if (bytes.length < 8) throw bad(file, `only ${bytes.length} bytes: not a safetensors file, or it was truncated.`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getBigUint64(0, true);
  if (headerLength > BigInt(Math.min(MAX_HEADER_BYTES, bytes.length - 8))) {
    throw bad(
      file,
      `header length ${headerLength} exceeds the file (${bytes.length} bytes): corrupt header or truncated file.`,
      { headerLength: Number(headerLength) },
    );
  }
  const n = Number(headerLength);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file}: corrupt header (not valid JSON); the file is damaged or not a safetensors file.`,
      { file },
      { cause: err },
    );
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    throw bad(file, 'corrupt header (not a JSON object).');
  return { header, headerBytes: n };
}

/** The header's metadata map, with the per-tensor checksums taken out of it. */
function splitMetadata(
  header: Record<string, unknown>,
  file: string,
): { metadata: Metadata; checksums: Map<string, string> } {
  const metadata: Metadata = {};
  const checksums = new Map<string, string>();
  const rawMeta = header[METADATA_KEY];
  if (rawMeta !== undefined) {
    if (typeof rawMeta !== 'object' || rawMeta === null) throw bad(file, `'${METADATA_KEY}' must be a map of strings.`);
    for (const [k, v] of Object.entries(rawMeta)) {
      if (typeof v !== 'string') throw bad(file, `metadata '${k}' is not a string.`, { key: k });
      if (k.startsWith(CHECKSUM_PREFIX)) checksums.set(k.slice(CHECKSUM_PREFIX.length), v);
      else metadata[k] = v;
    }
  }
  return { metadata, checksums };
}

/** The format forbids holes and overlaps: the tensors' spans must tile the data section exactly. */
function checkSpansTile(file: string, spans: [number, number, string][], dataBytes: number): void {
  spans.sort((a, b) => a[0] - b[0]);
  let at = 0;
  for (const [begin, end, name] of spans) {
    if (begin !== at)
      throw bad(file, `tensor '${name}' starts at byte ${begin}, expected ${at}: overlapping or missing data.`, {
        tensor: name,
      });
    at = end;
  }
  if (at !== dataBytes)
    throw bad(file, `${dataBytes - at} bytes after the last tensor: the file is corrupt.`, {
      extra: dataBytes - at,
    });
}

/** A file that records checksums must have one for every tensor, and each must match the tensor's bytes. */
function verifyChecksum(file: string, name: string, bytes: Uint8Array, checksums: ReadonlyMap<string, string>): void {
  if (checksums.size === 0) return; // an older file: nothing recorded to check against
  const recorded = checksums.get(name);
  if (recorded === undefined) {
    throw bad(
      file,
      `tensor '${name}' has no checksum while the other tensors do: the file was edited after saving. Resume from another checkpoint.`,
      { tensor: name },
    );
  }
  const actual = crc32Hex(bytes);
  if (actual !== recorded) {
    throw bad(
      file,
      `tensor '${name}' is damaged: its data has CRC-32 ${actual} but ${recorded} was recorded when it was saved. Resume from another checkpoint (or an intact copy of this one).`,
      {
        tensor: name,
        recorded,
        actual,
      },
    );
  }
}
