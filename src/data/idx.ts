/**
 * The IDX format of MNIST and Fashion-MNIST (`train-images-idx3-ubyte`, …):
 * two zero bytes, a type byte (0x08 = unsigned byte), the number of
 * dimensions, each dimension as a big-endian u32, then the values. Images are
 * idx3 (count × rows × cols), labels idx1 (count).
 *
 * Only unsigned-byte files are accepted: that is what both datasets ship, and
 * the pixels become float32 in [0, 1] here. Gzipped files (`.gz`) are
 * recognised by their magic bytes and inflated with DecompressionStream,
 * which the browser, Deno and Node all provide.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type ImageDataset, makeImageDataset } from './dataset.ts';

const TYPE_UBYTE = 0x08;
const TYPE_NAMES: Record<number, string> = {
  0x08: 'ubyte',
  0x09: 'sbyte',
  0x0b: 'i16',
  0x0c: 'i32',
  0x0d: 'f32',
  0x0e: 'f64',
};

export interface IdxArray {
  dims: number[];
  data: Uint8Array;
}

function bad(name: string, what: string, detail?: Record<string, unknown>): RingtrainError {
  return new RingtrainError(ErrorCode.BadData, `${name}: ${what}`, { file: name, ...detail });
}

export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

/** Inflates gzip data; passes anything else through unchanged. */
export async function gunzipIfNeeded(bytes: Uint8Array, name = 'file'): Promise<Uint8Array> {
  if (!isGzip(bytes)) return bytes;
  try {
    const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${name}: the gzip data is corrupt or truncated; download the file again.`,
      { file: name },
      { cause: err },
    );
  }
}

/** Parses an unsigned-byte IDX file, checking the magic number and that the size matches the header exactly. */
export function parseIdx(bytes: Uint8Array, name = 'idx file'): IdxArray {
  if (bytes.length < 4)
    throw bad(name, `only ${bytes.length} bytes, too short for an IDX header; the file is empty or truncated.`, {
      bytes: bytes.length,
    });
  if (bytes[0] !== 0 || bytes[1] !== 0) {
    const hex = Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join('');
    throw bad(
      name,
      `bad magic number 0x${hex}; this is not an IDX file (expected 0x00000801 for labels or 0x00000803 for images).`,
      { magic: hex },
    );
  }
  const type = bytes[2];
  if (type !== TYPE_UBYTE) {
    throw bad(
      name,
      `element type 0x${type.toString(16)} (${TYPE_NAMES[type] ?? 'unknown'}) is not supported; MNIST-style files hold unsigned bytes (0x08).`,
      { type },
    );
  }
  const ndims = bytes[3];
  if (ndims < 1) throw bad(name, 'the header declares 0 dimensions; the file is corrupt.');
  const headerBytes = 4 + 4 * ndims;
  if (bytes.length < headerBytes)
    throw bad(name, `truncated header: ${ndims} dimensions need ${headerBytes} bytes, the file has ${bytes.length}.`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dims: number[] = [];
  let count = 1;
  for (let i = 0; i < ndims; i++) {
    const d = view.getUint32(4 + 4 * i, false);
    dims.push(d);
    count *= d;
  }
  const have = bytes.length - headerBytes;
  if (have < count) {
    throw bad(
      name,
      `truncated: the header says ${dims.join('×')} = ${count} values, but only ${have} bytes follow; download the file again.`,
      { dims, expected: count, actual: have },
    );
  }
  if (have > count) {
    throw bad(
      name,
      `${have - count} bytes more than the header's ${dims.join('×')} values; the file is corrupt or not an IDX file.`,
      { dims, expected: count, actual: have },
    );
  }
  return { dims, data: bytes.subarray(headerBytes, headerBytes + count) };
}

/** A dataset from an idx3 images file and an idx1 labels file (raw or gzipped bytes). */
export async function idxDataset(
  imagesFile: { bytes: Uint8Array; name: string },
  labelsFile: { bytes: Uint8Array; name: string },
  classes = 10,
): Promise<ImageDataset> {
  const images = parseIdx(await gunzipIfNeeded(imagesFile.bytes, imagesFile.name), imagesFile.name);
  const labels = parseIdx(await gunzipIfNeeded(labelsFile.bytes, labelsFile.name), labelsFile.name);
  if (images.dims.length !== 3) {
    throw bad(
      imagesFile.name,
      `expected an images file with 3 dimensions (count × rows × cols), got ${images.dims.length} (${images.dims.join('×')}); did you swap images and labels?`,
      { dims: images.dims },
    );
  }
  if (labels.dims.length !== 1) {
    throw bad(
      labelsFile.name,
      `expected a labels file with 1 dimension, got ${labels.dims.length} (${labels.dims.join('×')}); did you swap images and labels?`,
      { dims: labels.dims },
    );
  }
  const [count, rows, cols] = images.dims;
  if (labels.dims[0] !== count) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${imagesFile.name} holds ${count} images but ${labelsFile.name} holds ${labels.dims[0]} labels; use the matching pair of files.`,
      { images: count, labels: labels.dims[0] },
    );
  }
  const pixels = new Float32Array(images.data.length);
  for (let i = 0; i < pixels.length; i++) pixels[i] = images.data[i] / 255;
  return makeImageDataset(
    { images: pixels, labels: new Uint8Array(labels.data), height: rows, width: cols, classes },
    labelsFile.name,
  );
}
