/**
 * The receive buffers a stream link reuses: a buffer is handed out again only once its message
 * was given back, a message held meanwhile keeps its bytes, and a view kept past its release
 * reads nothing (its buffer is detached) rather than a later message.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { ReceiveBuffers } from '../../src/comm/receive-buffers.ts';

const BYTES = 1024;

/** Marks the spare tail of `m`'s buffer (past any message used here), to see the memory again later. */
function mark(m: Uint8Array, value: number): void {
  new Uint8Array(m.buffer, BYTES - 1, 1)[0] = value;
}
const markOf = (m: Uint8Array) => new Uint8Array(m.buffer, BYTES - 1, 1)[0];

describe('ReceiveBuffers', () => {
  it("hands a given-back buffer's memory to the next message, and never one that is still held", () => {
    const pool = new ReceiveBuffers(BYTES, 4, 16);
    const held = pool.take(512).fill(7);
    const first = pool.take(512);
    mark(first, 1);
    pool.give(first.subarray(16));
    // The given-back view and every other view of its buffer are detached: empty, and unusable.
    expect(first.byteLength).toBe(0);
    expect(() => first.set([1])).toThrow(TypeError);
    const next = pool.take(600);
    expect([next.byteOffset, next.byteLength, markOf(next)]).toEqual([0, 600, 1]);
    // The held message was never lent again: its bytes are as written.
    expect(held.every((b) => b === 7)).toBe(true);
    expect(markOf(held)).toBe(0);
  });

  it('refuses a second release of one message, and leaves arrays it did not lend alone', () => {
    const pool = new ReceiveBuffers(BYTES, 4, 16);
    const m = pool.take(100);
    pool.give(m);
    let thrown: unknown;
    try {
      pool.give(m);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(RingtrainError);
    expect((thrown as RingtrainError).code).toBe(ErrorCode.InvalidArgument);
    expect((thrown as Error).message).toMatch(/released twice/);
    const foreign = new Uint8Array(100).fill(3);
    pool.give(foreign);
    expect(foreign.every((b) => b === 3)).toBe(true);
  });

  it('gives short and oversized messages arrays of their own, and keeps at most `keep` free buffers', () => {
    const pool = new ReceiveBuffers(BYTES, 2, 16);
    for (const n of [0, 15, BYTES + 1]) expect(pool.take(n).buffer.byteLength).toBe(n);
    const lent = [1, 2, 3].map((v) => {
      const m = pool.take(BYTES);
      mark(m, v);
      return m;
    });
    lent.forEach((m) => pool.give(m));
    // Two kept (the last two given back, taken in reverse), the third went to the collector.
    expect([1, 2, 3].map(() => markOf(pool.take(BYTES)))).toEqual([2, 1, 0]);
  });
});
