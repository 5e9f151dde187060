/**
 * Checkpoint integrity: a CRC-32 per tensor is recorded on save and checked on
 * load, so damaged data is refused by the tensor's name; files without
 * checksums (older ringtrain) still load and say so once; non-finite values
 * are refused wherever they sit.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import {
  checkpointFromFlat,
  decodeCheckpoint,
  encodeCheckpoint,
  type LayoutEntry,
} from '../../src/checkpoint/checkpoint.ts';
import { crc32, crc32Hex } from '../../src/checkpoint/crc32.ts';
import { loadCheckpoint } from '../../src/checkpoint/file.node.ts';
import { decodeSafetensors, encodeSafetensors } from '../../src/checkpoint/safetensors.ts';

const layout: LayoutEntry[] = [
  { name: 'dense0.weight', shape: [100, 50], offset: 0, length: 5000 },
  { name: 'dense0.bias', shape: [50], offset: 5000, length: 50 },
];
const params = Float32Array.from({ length: 5050 }, (_, i) => Math.sin(i) * 0.1);
const momentum = Float32Array.from({ length: 5050 }, (_, i) => Math.cos(i) * 0.01);
const ckpt = checkpointFromFlat({
  model: 'mlp',
  optimizer: 'sgd',
  step: 40,
  layout,
  params,
  optimizerState: { momentum },
});

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-crc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function refused(fn: () => unknown): Error {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(isRingtrainError(err, 'ERR_BAD_CHECKPOINT'), String(err)).toBe(true);
  return err as Error;
}

/** Where a tensor's bytes start in an encoded file, read from its header. */
function dataStart(bytes: Uint8Array, tensor: string): number {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  return 8 + n + header[tensor].data_offsets[0];
}

describe('checkpoint checksums', () => {
  it('computes the standard CRC-32 (IEEE) check value', () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
    expect(crc32Hex(new TextEncoder().encode('a'))).toBe('e8b7be43');
    // zlib's as the oracle, on every length around the 4-byte steps and at odd offsets.
    const bytes = Uint8Array.from({ length: 4099 }, (_, i) => (i * 2654435761) >>> 24);
    for (const [from, to] of [
      [0, 0],
      [0, 1],
      [1, 4],
      [3, 8],
      [0, 9],
      [5, 1030],
      [0, 4099],
    ]) {
      expect(crc32(bytes.subarray(from, to)), `${from}..${to}`).toBe(zlibCrc32(bytes.subarray(from, to)));
    }
  });

  it('records one checksum per tensor and verifies them on load', () => {
    const bytes = encodeCheckpoint(ckpt);
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))).__metadata__;
    expect(
      Object.keys(meta)
        .filter((k) => k.startsWith('crc32:'))
        .sort(),
    ).toEqual(['crc32:optim/momentum', 'crc32:param/dense0.bias', 'crc32:param/dense0.weight']);
    const back = decodeCheckpoint(bytes, 'ok.safetensors');
    expect(back.integrity).toBe('verified');
    // The checksums are not part of what the caller recorded.
    expect(Object.keys(back.extra).some((k) => k.startsWith('crc32:'))).toBe(false);
    expect([...back.params['dense0.weight'].data.subarray(0, 3)]).toEqual([...params.subarray(0, 3)]);
  });

  it('refuses a flipped bit with the name of the tensor that holds it', () => {
    for (const [tensor, at] of [
      ['param/dense0.weight', 1234],
      ['param/dense0.bias', 7],
      ['optim/momentum', 4999],
    ] as const) {
      const bytes = encodeCheckpoint(ckpt);
      bytes[dataStart(bytes, tensor) + at * 4 + 1] ^= 0x10;
      const err = refused(() => decodeCheckpoint(bytes, 'flipped.safetensors'));
      expect(err.message).toMatch(
        new RegExp(
          `flipped\\.safetensors: tensor '${tensor.replace('.', '\\.')}' is damaged: its data has CRC-32 [0-9a-f]{8} but [0-9a-f]{8} was recorded`,
        ),
      );
      expect((err as { detail?: { tensor?: string } }).detail?.tensor).toBe(tensor);
    }
  });

  it('refuses 2,000 weights overwritten with 1e37 (finite, so only the checksum can tell)', () => {
    const bytes = encodeCheckpoint(ckpt);
    const start = dataStart(bytes, 'param/dense0.weight');
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < 2000; i++) view.setFloat32(start + (1000 + i) * 4, 1e37, true);
    const path = join(dir, 'overwritten.safetensors');
    writeFileSync(path, bytes);
    const err = refused(() => loadCheckpoint(path));
    expect(err.message).toMatch(/overwritten\.safetensors: tensor 'param\/dense0\.weight' is damaged/);
  });

  it('refuses a file whose checksums were partly removed or name a missing tensor', () => {
    const tensors = { a: { shape: [2], data: Float32Array.of(1, 2) }, b: { shape: [1], data: Float32Array.of(3) } };
    const plain = encodeSafetensors(tensors, {}, { checksums: false });
    const full = decodeSafetensors(encodeSafetensors(tensors), 'x');
    expect(full.integrity).toBe('verified');
    const reheader = (meta: Record<string, string>) => {
      // Same data, a header with the metadata we choose.
      const n = Number(new DataView(plain.buffer).getBigUint64(0, true));
      const header = JSON.parse(new TextDecoder().decode(plain.subarray(8, 8 + n)));
      const json = new TextEncoder().encode(JSON.stringify({ ...header, __metadata__: meta }));
      const out = new Uint8Array(8 + json.length + plain.length - 8 - n);
      new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
      out.set(json, 8);
      out.set(plain.subarray(8 + n), 8 + json.length);
      return out;
    };
    const crcA = crc32Hex(new Uint8Array(Float32Array.of(1, 2).buffer));
    expect(
      decodeSafetensors(reheader({ 'crc32:a': crcA, 'crc32:b': crc32Hex(new Uint8Array(Float32Array.of(3).buffer)) }))
        .integrity,
    ).toBe('verified');
    let err = refused(() => decodeSafetensors(reheader({ 'crc32:a': crcA }), 'part.st'));
    expect(err.message).toMatch(/part\.st: tensor 'b' has no checksum while the other tensors do/);
    err = refused(() =>
      decodeSafetensors(reheader({ 'crc32:a': crcA, 'crc32:b': '00000000', 'crc32:c': '00000000' }), 'extra.st'),
    );
    expect(err.message).toMatch(/tensor 'b' is damaged/);
    err = refused(() =>
      decodeSafetensors(
        reheader({
          'crc32:a': crcA,
          'crc32:b': crc32Hex(new Uint8Array(Float32Array.of(3).buffer)),
          'crc32:c': '00000000',
        }),
        'extra.st',
      ),
    );
    expect(err.message).toMatch(/extra\.st: metadata holds a checksum for tensor 'c', which the file does not have/);
    expect(() => encodeSafetensors(tensors, { 'crc32:a': '0' })).toThrow(/reserved for checksums/);
  });

  it('loads a checkpoint saved without checksums and says so once on stderr', () => {
    const path = join(dir, 'old.safetensors');
    // An older ringtrain wrote the same container without the crc32 keys.
    const bytes = encodeCheckpoint(ckpt);
    const decoded = decodeSafetensors(bytes);
    writeFileSync(path, encodeSafetensors(decoded.tensors, decoded.metadata, { checksums: false }));
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const a = loadCheckpoint(path);
      const b = loadCheckpoint(path);
      expect([a.integrity, b.integrity, a.step]).toEqual(['unverified', 'unverified', 40]);
      expect(a.params['dense0.bias'].data).toEqual(ckpt.params['dense0.bias'].data);
      const lines = write.mock.calls.map((c) => String(c[0])).filter((l) => l.includes('old.safetensors'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/old\.safetensors records no checksums .* cannot be verified/);
    } finally {
      write.mockRestore();
    }
  });

  it('refuses NaN or infinite values in weights and optimizer state, naming the tensor', () => {
    const nanWeights = checkpointFromFlat({
      model: 'mlp',
      optimizer: 'sgd',
      step: 1,
      layout,
      params: params.map((v, i) => (i === 5010 ? NaN : v)),
    });
    let err = refused(() => decodeCheckpoint(encodeCheckpoint(nanWeights), 'nan.st'));
    expect(err.message).toMatch(
      /nan\.st: tensor 'param\/dense0\.bias' holds NaN at index 10; the run that saved it had diverged/,
    );
    const infState = { ...ckpt, optimizerState: { momentum: momentum.map((v, i) => (i === 3 ? -Infinity : v)) } };
    err = refused(() => decodeCheckpoint(encodeCheckpoint(infState), 'inf.st'));
    expect(err.message).toMatch(/tensor 'optim\/momentum' holds -Infinity at index 3/);
    // The same values in a file without checksums are refused too.
    const old = decodeSafetensors(encodeCheckpoint(nanWeights));
    refused(() => decodeCheckpoint(encodeSafetensors(old.tensors, old.metadata, { checksums: false })));
  });
});
