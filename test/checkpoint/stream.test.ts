/**
 * Checkpoints are written tensor by tensor: the file is the header and then
 * each tensor's bytes, written from the checkpoint's own arrays, and it is
 * byte for byte the file the in-memory writer of commit ef2ca4a wrote for the
 * same checkpoint (fixtures/writer-ef2ca4a.safetensors). Still atomic: a save
 * that fails leaves the file that was there, and no temporary file.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointPieces, decodeCheckpoint, encodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { saveCheckpoint } from '../../src/checkpoint/file.node.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { sampleCheckpoint } from './sample-checkpoint.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-stream-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const oldFile = readFileSync(new URL('./fixtures/writer-ef2ca4a.safetensors', import.meta.url));

describe('streamed checkpoints', () => {
  it('write the same bytes as the in-memory writer did, and read back the same checkpoint', () => {
    const c = sampleCheckpoint();
    const path = join(dir, 'ck.safetensors');
    saveCheckpoint(path, c);
    const written = readFileSync(path);
    expect(written.length).toBe(oldFile.length);
    expect(Buffer.compare(written, oldFile)).toBe(0);
    expect(Buffer.compare(Buffer.from(encodeCheckpoint(c)), oldFile)).toBe(0);
    const back = decodeCheckpoint(new Uint8Array(written), path);
    expect(back.integrity).toBe('verified');
    expect(back.params['head.weight'].data).toEqual(c.params['head.weight'].data);
    expect(back.optimizerState.v).toEqual(c.optimizerState.v);
  });

  it('hold nothing beyond the header and the tensors themselves: each tensor piece is a view of its own array', () => {
    const c = sampleCheckpoint();
    const arrays = [...Object.values(c.params).map((t) => t.data), ...Object.values(c.optimizerState)];
    const [header, ...tensors] = [...checkpointPieces(c)];
    expect(header.length).toBe(8 + Number(new DataView(oldFile.buffer, oldFile.byteOffset).getBigUint64(0, true)));
    expect(tensors).toHaveLength(arrays.length);
    tensors.forEach((piece, i) => {
      expect(piece.buffer).toBe(arrays[i].buffer);
      expect(piece.byteLength).toBe(arrays[i].byteLength);
    });
  });

  it('stay atomic: a save that fails leaves the file that was there, and no temporary file', () => {
    const path = join(dir, 'kept.safetensors');
    const c = sampleCheckpoint();
    saveCheckpoint(path, c);
    const broken = sampleCheckpoint();
    broken.step = 38;
    broken.params['head.weight'] = { shape: [5, 5], data: new Float32Array(20) };
    expect(() => saveCheckpoint(path, broken)).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidArgument,
        message: expect.stringContaining("tensor 'param/head.weight'"),
      }),
    );
    expect(Buffer.compare(readFileSync(path), oldFile)).toBe(0);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
