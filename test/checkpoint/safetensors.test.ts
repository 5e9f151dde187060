import { describe, expect, it } from 'vitest';
import { isRingtrainError } from '../../src/core/errors.ts';
import { decodeSafetensors, encodeSafetensors } from '../../src/checkpoint/safetensors.ts';

/** A safetensors file built by hand from the format description, independent of our encoder. */
function handMade(header: object, data: number[], lengthOverride?: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length * 4);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(lengthOverride ?? json.length), true);
  out.set(json, 8);
  data.forEach((v, i) => view.setFloat32(8 + json.length + i * 4, v, true));
  return out;
}

function expectBad(fn: () => unknown, pattern: RegExp): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(isRingtrainError(err, 'ERR_BAD_CHECKPOINT'), String(err)).toBe(true);
  expect((err as Error).message).toMatch(pattern);
}

describe('safetensors', () => {
  it('reads a file written to the spec by hand', () => {
    const bytes = handMade(
      {
        __metadata__: { model: 'mlp' },
        b: { dtype: 'F32', shape: [2], data_offsets: [24, 32] },
        a: { dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] },
      },
      [1, 2, 3, 4, 5, 6, -1.5, 0.25],
    );
    const { tensors, metadata } = decodeSafetensors(bytes);
    expect(metadata).toEqual({ model: 'mlp' });
    expect(tensors.a.shape).toEqual([2, 3]);
    expect([...tensors.a.data]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...tensors.b.data]).toEqual([-1.5, 0.25]);
  });

  it('round-trips, with an 8-byte-aligned data section and a little-endian u64 length', () => {
    const w = { shape: [3, 1], data: new Float32Array([0.1, -2, 3e-8]) };
    const s = { shape: [], data: new Float32Array([7]) };
    const bytes = encodeSafetensors({ w, s }, { step: '12' });
    const headerLength = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect((8 + headerLength) % 8).toBe(0);
    expect(JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))).w).toEqual({
      dtype: 'F32',
      shape: [3, 1],
      data_offsets: [0, 12],
    });
    const back = decodeSafetensors(bytes);
    expect(back.metadata).toEqual({ step: '12' });
    expect(back.tensors.w).toEqual(w);
    expect(back.tensors.s).toEqual(s);
  });

  it('rejects a corrupt header', () => {
    expectBad(() => decodeSafetensors(new Uint8Array(5), 'x.st'), /x\.st: only 5 bytes/);
    expectBad(
      () => decodeSafetensors(handMade({ a: 1 }, [], 1 << 30), 'x.st'),
      /header length 1073741824 exceeds the file/,
    );
    const garbled = handMade({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, [1]);
    garbled[10] = 0x7b;
    garbled[11] = 0xff;
    expectBad(() => decodeSafetensors(garbled, 'g.st'), /g\.st: corrupt header \(not valid JSON\)/);
    expectBad(
      () => decodeSafetensors(handMade({ a: { dtype: 'F32', shape: [1] } }, [1])),
      /tensor 'a' has a malformed header entry/,
    );
    expectBad(() => decodeSafetensors(handMade({ __metadata__: { step: 3 } }, [])), /metadata 'step' is not a string/);
  });

  it('rejects truncated data, naming the tensor', () => {
    const bytes = encodeSafetensors({
      layer1: { shape: [4], data: new Float32Array(4) },
      layer2: { shape: [4], data: new Float32Array(4) },
    });
    expectBad(
      () => decodeSafetensors(bytes.subarray(0, bytes.length - 3), 'cut.st'),
      /tensor 'layer2' ends at byte 32 but the data section has 29: the file is truncated/,
    );
  });

  it('rejects a wrong dtype, a shape that disagrees with its offsets, holes and trailing bytes', () => {
    expectBad(
      () => decodeSafetensors(handMade({ h: { dtype: 'F16', shape: [2], data_offsets: [0, 4] } }, [0])),
      /tensor 'h' has dtype F16; ringtrain checkpoints hold F32 only/,
    );
    expectBad(
      () => decodeSafetensors(handMade({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, [1, 2])),
      /shape \[3\] needs 12 bytes but data_offsets span 8/,
    );
    expectBad(
      () => decodeSafetensors(handMade({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, [1, 2])),
      /starts at byte 4, expected 0/,
    );
    expectBad(
      () => decodeSafetensors(handMade({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, [1, 2])),
      /4 bytes after the last tensor/,
    );
  });
});
