import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { isRingtrainError, type RingtrainError } from '../../src/core/errors.ts';
import { parseIdx } from '../../src/data/idx.ts';
import { loadIdxDataset, loadIdxSplit } from '../../src/data/idx.node.ts';

/** Writes an unsigned-byte IDX file: the magic, the dims as big-endian u32, then the values. */
function idxBytes(dims: number[], values: number[], type = 0x08): Uint8Array {
  const out = new Uint8Array(4 + 4 * dims.length + values.length);
  const view = new DataView(out.buffer);
  out[2] = type;
  out[3] = dims.length;
  dims.forEach((d, i) => view.setUint32(4 + 4 * i, d, false));
  out.set(values, 4 + 4 * dims.length);
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-idx-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Three 2×3 images with pixel values i*10+p, labels 7, 0, 3. */
const pixels = Array.from({ length: 3 * 6 }, (_, k) => Math.floor(k / 6) * 10 + (k % 6));
const images = idxBytes([3, 2, 3], pixels);
const labels = idxBytes([3], [7, 0, 3]);

function write(name: string, bytes: Uint8Array): string {
  const p = join(dir, name);
  writeFileSync(p, bytes);
  return p;
}

async function badData(p: Promise<unknown>): Promise<RingtrainError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isRingtrainError(err, 'ERR_BAD_DATA'), String(err)).toBe(true);
  return err as RingtrainError;
}

describe('IDX loader', () => {
  it('reads images and labels, scaling pixels to [0, 1]', async () => {
    const d = await loadIdxDataset(write('img', images), write('lab', labels));
    expect(d.count).toBe(3);
    expect([d.height, d.width]).toEqual([2, 3]);
    expect([...d.labels]).toEqual([7, 0, 3]);
    expect(d.images[6 * 2 + 5]).toBeCloseTo(25 / 255, 6);
  });

  it('reads gzipped files and the standard names in a directory', async () => {
    const sub = join(dir, 'fashion');
    mkdirSync(sub);
    writeFileSync(join(sub, 't10k-images-idx3-ubyte.gz'), gzipSync(images));
    writeFileSync(join(sub, 't10k-labels-idx1-ubyte'), labels);
    const d = await loadIdxSplit(sub, 't10k');
    expect([...d.labels]).toEqual([7, 0, 3]);
    expect(d.images[17]).toBeCloseTo(25 / 255, 6);
    const err = await badData(loadIdxSplit(sub, 'train'));
    expect(err.message).toMatch(/train-images-idx3-ubyte\(\.gz\) not found/);
  });

  it('names a missing file', async () => {
    const err = await badData(loadIdxDataset(join(dir, 'nope'), write('lab2', labels)));
    expect(err.message).toMatch(/nope does not exist/);
  });

  it('rejects a bad magic number', () => {
    const notIdx = new TextEncoder().encode('PK\x03\x04 a zip file');
    expect(() => parseIdx(notIdx, 'x.zip')).toThrow(/x\.zip: bad magic number 0x504b0304/);
  });

  it('rejects a non-byte element type', () => {
    expect(() => parseIdx(idxBytes([1], [0, 0, 0, 0], 0x0d), 'f.idx')).toThrow(/0xd \(f32\) is not supported/);
  });

  it('rejects truncated data, a truncated header and trailing bytes', async () => {
    const truncated = images.subarray(0, images.length - 5);
    const err = await badData(loadIdxDataset(write('trunc', truncated), write('lab3', labels)));
    expect(err.message).toMatch(/trunc: truncated: the header says 3×2×3 = 18 values, but only 13 bytes follow/);
    expect(() => parseIdx(images.subarray(0, 9), 'h')).toThrow(/truncated header: 3 dimensions need 16 bytes/);
    expect(() => parseIdx(new Uint8Array([0, 0]), 'e')).toThrow(/too short/);
    const long = new Uint8Array(labels.length + 2);
    long.set(labels);
    expect(() => parseIdx(long, 'l')).toThrow(/2 bytes more than the header/);
  });

  it('rejects a corrupt gzip stream', async () => {
    const gz = gzipSync(images);
    const err = await badData(loadIdxDataset(write('cut.gz', gz.subarray(0, gz.length - 12)), write('lab4', labels)));
    expect(err.message).toMatch(/gzip data is corrupt or truncated/);
  });

  it('rejects mismatched or swapped pairs', async () => {
    const fewer = idxBytes([2], [1, 2]);
    let err = await badData(loadIdxDataset(write('img5', images), write('lab5', fewer)));
    expect(err.message).toMatch(/holds 3 images but lab5 holds 2 labels/);
    err = await badData(loadIdxDataset(write('lab6', labels), write('img6', images)));
    expect(err.message).toMatch(/swap images and labels/);
    err = await badData(loadIdxDataset(write('img7', images), write('lab7', idxBytes([3], [1, 2, 99]))));
    expect(err.message).toMatch(/label 99 at index 2/);
  });
});
