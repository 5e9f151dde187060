/**
 * The safetensors container: an 8-byte little-endian header length N, N bytes
 * of JSON (`{ "<tensor>": { "dtype", "shape", "data_offsets": [begin, end] },
 * "__metadata__": { string: string } }`), then the tensor bytes, little-endian,
 * offsets relative to the end of the header. We write F32 only, pad the header
 * with spaces so the data starts 8-byte aligned, and read with strict checks:
 * a checkpoint that is half-written or edited by hand fails here, by name.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export interface Tensor {
  shape: number[];
  data: Float32Array;
}
export type NamedTensors = Record<string, Tensor>;
export type Metadata = Record<string, string>;

const METADATA_KEY = '__metadata__';
/** Headers beyond this are not ours (and would make us allocate without bound on a corrupt length). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const BYTES_PER_F32 = 4;

function bad(file: string, what: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.BadCheckpoint, `${file}: ${what}`, { file, ...detail });
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function encodeSafetensors(tensors: NamedTensors, metadata: Metadata = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header[METADATA_KEY] = metadata;
  let offset = 0;
  const names = Object.keys(tensors);
  for (const name of names) {
    if (name === METADATA_KEY) throw new RingtrainError(ErrorCode.InvalidArgument, `'${METADATA_KEY}' is reserved and cannot name a tensor.`);
    const { shape, data } = tensors[name];
    if (!shape.every((d) => Number.isInteger(d) && d >= 0) || elementCount(shape) !== data.length) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `tensor '${name}': shape [${shape}] does not hold its ${data.length} values.`, { name, shape, length: data.length });
    }
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + data.length * BYTES_PER_F32] };
    offset += data.length * BYTES_PER_F32;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + new TextEncoder().encode(json).length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  const base = 8 + headerBytes.length;
  for (const name of names) {
    const { data } = tensors[name];
    const at = base + (header[name] as { data_offsets: number[] }).data_offsets[0];
    for (let i = 0; i < data.length; i++) view.setFloat32(at + i * BYTES_PER_F32, data[i], true);
  }
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
    typeof e === 'object' && e !== null && typeof e.dtype === 'string' &&
    Array.isArray(e.shape) && e.shape.every((d) => Number.isInteger(d) && d >= 0) &&
    Array.isArray(e.data_offsets) && e.data_offsets.length === 2 && e.data_offsets.every((d) => Number.isInteger(d) && d >= 0)
  );
}

/** Parses and validates a safetensors file; `file` names it in errors. */
export function decodeSafetensors(bytes: Uint8Array, file = 'checkpoint'): { tensors: NamedTensors; metadata: Metadata } {
  if (bytes.length < 8) throw bad(file, `only ${bytes.length} bytes: not a safetensors file, or it was truncated.`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getBigUint64(0, true);
  if (headerLength > BigInt(Math.min(MAX_HEADER_BYTES, bytes.length - 8))) {
    throw bad(file, `header length ${headerLength} exceeds the file (${bytes.length} bytes): corrupt header or truncated file.`, { headerLength: Number(headerLength) });
  }
  const n = Number(headerLength);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (err) {
    throw new RingtrainError(ErrorCode.BadCheckpoint, `${file}: corrupt header (not valid JSON); the file is damaged or not a safetensors file.`, { file }, { cause: err });
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) throw bad(file, 'corrupt header (not a JSON object).');

  const metadata: Metadata = {};
  const rawMeta = header[METADATA_KEY];
  if (rawMeta !== undefined) {
    if (typeof rawMeta !== 'object' || rawMeta === null) throw bad(file, `'${METADATA_KEY}' must be a map of strings.`);
    for (const [k, v] of Object.entries(rawMeta)) {
      if (typeof v !== 'string') throw bad(file, `metadata '${k}' is not a string.`, { key: k });
      metadata[k] = v;
    }
  }

  const data = bytes.subarray(8 + n);
  const tensors: NamedTensors = {};
  const spans: [number, number, string][] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === METADATA_KEY) continue;
    if (!isEntry(entry)) throw bad(file, `tensor '${name}' has a malformed header entry (needs dtype, shape and data_offsets).`, { tensor: name });
    if (entry.dtype !== 'F32') {
      throw bad(file, `tensor '${name}' has dtype ${entry.dtype}; ringtrain checkpoints hold F32 only.`, { tensor: name, dtype: entry.dtype });
    }
    const [begin, end] = entry.data_offsets;
    const count = elementCount(entry.shape);
    if (end - begin !== count * BYTES_PER_F32) {
      throw bad(file, `tensor '${name}': shape [${entry.shape}] needs ${count * BYTES_PER_F32} bytes but data_offsets span ${end - begin}.`, { tensor: name, shape: entry.shape });
    }
    if (end > data.length) {
      throw bad(file, `tensor '${name}' ends at byte ${end} but the data section has ${data.length}: the file is truncated.`, { tensor: name, end, available: data.length });
    }
    const values = new Float32Array(count);
    const dv = new DataView(data.buffer, data.byteOffset + begin, end - begin);
    for (let i = 0; i < count; i++) values[i] = dv.getFloat32(i * BYTES_PER_F32, true);
    tensors[name] = { shape: entry.shape, data: values };
    spans.push([begin, end, name]);
  }
  // The format forbids holes and overlaps: the spans must tile the data section exactly.
  spans.sort((a, b) => a[0] - b[0]);
  let at = 0;
  for (const [begin, end, name] of spans) {
    if (begin !== at) throw bad(file, `tensor '${name}' starts at byte ${begin}, expected ${at}: overlapping or missing data.`, { tensor: name });
    at = end;
  }
  if (at !== data.length) throw bad(file, `${data.length - at} bytes after the last tensor: the file is corrupt.`, { extra: data.length - at });
  return { tensors, metadata };
}
