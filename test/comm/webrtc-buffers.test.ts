/**
 * A WebRTC link's message memory (src/comm/webrtc-buffers.ts): send buffers come back only once
 * sent, and a received message given back is detached, once. The links over real data channels,
 * with every byte compared, are in webrtc-ring.test.ts ('every collective', the stream of odd sizes).
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { MAX_MESSAGE_BYTES } from '../../src/comm/frame.ts';
import { ReceivedMessages, SendBuffers } from '../../src/comm/webrtc-buffers.ts';

/**
 * A received array that detaches as the runtime's `transfer(0)` does. Node 20 has no
 * `ArrayBuffer.prototype.transfer`; structuredClone's transfer detaches the same way.
 */
function receivedArray(bytes: number, fill: number): Uint8Array {
  const buffer = new ArrayBuffer(bytes);
  if (!('transfer' in buffer))
    Object.defineProperty(buffer, 'transfer', { value: () => structuredClone(buffer, { transfer: [buffer] }) });
  return new Uint8Array(buffer).fill(fill);
}

/** A ring segment's frame: what the pool is for. */
const MAX_FRAME = MAX_MESSAGE_BYTES;

describe('SendBuffers', () => {
  it('hands a sent buffer to the next frame, and never one not yet sent', () => {
    const pool = new SendBuffers();
    const queued = pool.take(100_000).fill(7);
    const sent = pool.take(MAX_MESSAGE_BYTES);
    pool.give(sent);
    const next = pool.take(MAX_FRAME);
    expect(next.buffer).toBe(sent.buffer);
    expect([next.byteOffset, next.byteLength]).toEqual([0, MAX_FRAME]);
    expect(next.buffer).not.toBe(queued.buffer);
    expect(queued.every((b) => b === 7)).toBe(true);
  });

  it('leaves arrays it did not hand out alone, and gives small and oversized frames arrays of their own', () => {
    const pool = new SendBuffers();
    const foreign = new Uint8Array(MAX_FRAME);
    pool.give(foreign);
    expect(pool.take(MAX_FRAME).buffer).not.toBe(foreign.buffer);
    const small = pool.take(100);
    expect(small.buffer.byteLength).toBe(100);
    const big = pool.take(MAX_MESSAGE_BYTES + 1);
    expect(big.buffer.byteLength).toBe(MAX_MESSAGE_BYTES + 1);
    pool.give(small);
    pool.give(big);
    expect(pool.take(MAX_FRAME).buffer.byteLength).toBe(MAX_MESSAGE_BYTES);
  });

  it('keeps at most 16 free buffers', () => {
    const pool = new SendBuffers();
    const out = Array.from({ length: 20 }, () => pool.take(MAX_FRAME));
    for (const f of out) pool.give(f);
    const again = new Set(Array.from({ length: 20 }, () => pool.take(MAX_FRAME).buffer));
    const reused = out.filter((f) => again.has(f.buffer));
    expect(reused.length).toBe(16);
  });
});

describe('ReceivedMessages', () => {
  it('detaches a message given back, through any view of it, and leaves the others as they were', () => {
    const received = new ReceivedMessages();
    const a = receivedArray(4096, 1);
    const b = receivedArray(4097, 2);
    received.deliver(a);
    received.deliver(b);
    const payload = a.subarray(16);
    received.free(payload);
    expect([a.byteLength, payload.byteLength, a.buffer.byteLength]).toEqual([0, 0, 0]);
    expect(() => new Uint8Array(a.buffer)).toThrow(TypeError);
    expect(b.byteLength).toBe(4097);
    expect(b.every((x) => x === 2)).toBe(true);
  });

  it('refuses a second release, and leaves arrays it did not deliver alone', () => {
    const received = new ReceivedMessages();
    const m = receivedArray(64, 3);
    received.deliver(m);
    received.free(m);
    let thrown: unknown;
    try {
      received.free(m);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(RingtrainError);
    expect((thrown as RingtrainError).code).toBe(ErrorCode.InvalidArgument);
    expect((thrown as Error).message).toMatch(/released twice/);
    const foreign = receivedArray(64, 4);
    received.free(foreign);
    expect(foreign.every((x) => x === 4)).toBe(true);
  });
});
