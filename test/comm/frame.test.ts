import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrames, FrameKind, MAX_MESSAGE_BYTES, Reassembler } from '../../src/comm/frame.ts';

describe('framing', () => {
  it('cuts big payloads into messages of at most 256 KiB and glues them back', () => {
    const payload = Uint8Array.from({ length: 3 * MAX_MESSAGE_BYTES + 5 }, (_, i) => (i * 31) & 255);
    const frames = encodeFrames(FrameKind.Data, { id: 7, step: 65537, chunk: 3 }, payload);
    expect(frames.length).toBe(4);
    for (const f of frames) expect(f.byteLength).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    const r = new Reassembler();
    const out = frames.map((f) => r.push(decodeFrame(f)));
    expect(out.slice(0, 3)).toEqual([null, null, null]);
    expect(out[3]!.tag).toEqual({ id: 7, step: 65537, chunk: 3 });
    expect(Buffer.compare(out[3]!.payload, payload)).toBe(0);
  });

  it('sends an empty payload as one frame', () => {
    const frames = encodeFrames(FrameKind.Data, { id: 1, step: 2, chunk: 3 }, new Uint8Array(0));
    expect(frames.length).toBe(1);
    expect(new Reassembler().push(decodeFrame(frames[0]))!.payload.byteLength).toBe(0);
  });

  it('refuses garbage and interleaved messages', () => {
    expect(() => decodeFrame(new Uint8Array(3))).toThrow(/shorter than/);
    expect(() => decodeFrame(new Uint8Array(16).fill(9))).toThrow(/unknown frame kind/);
    const a = encodeFrames(FrameKind.Data, { id: 1, step: 0, chunk: 0 }, new Uint8Array(MAX_MESSAGE_BYTES));
    const b = encodeFrames(FrameKind.Data, { id: 2, step: 0, chunk: 0 }, new Uint8Array(4));
    const r = new Reassembler();
    r.push(decodeFrame(a[0]));
    expect(() => r.push(decodeFrame(b[0]))).toThrow(/in the middle of/);
  });
});
