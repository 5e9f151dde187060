/**
 * Length-prefixed messages over a stream cut at arbitrary points: every
 * message comes out whole, in order, aligned for typed-array views, and a
 * length past the cap is refused before its bytes are kept.
 */
import { describe, expect, it } from 'vitest';
import { lengthPrefix, LengthPrefixedReader, OversizedMessage } from '../../src/comm/stream-frames.ts';

/** `messages` as they go over the stream: each behind its length. */
function onTheWire(messages: Uint8Array[]): Uint8Array {
  const parts = messages.flatMap((m) => [lengthPrefix(m.byteLength), m]);
  const bytes = new Uint8Array(parts.reduce((s, p) => s + p.byteLength, 0));
  parts.reduce((o, p) => (bytes.set(p, o), o + p.byteLength), 0);
  return bytes;
}

/** A stream of `sizes.length` messages, each filled with its own index. */
function stream(sizes: number[]): { bytes: Uint8Array; messages: Uint8Array[] } {
  const messages = sizes.map((n, i) => new Uint8Array(n).fill(i + 1));
  return { bytes: onTheWire(messages), messages };
}

/** Deterministic cut points (a small LCG), so a failure replays. */
function cuts(total: number, seed: number, maxChunk: number): number[] {
  const out: number[] = [];
  let x = seed;
  for (let at = 0; at < total;) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    at = Math.min(total, at + 1 + (x % maxChunk));
    out.push(at);
  }
  return out;
}

describe('LengthPrefixedReader', () => {
  for (const [seed, maxChunk] of [
    [1, 1],
    [2, 3],
    [3, 17],
    [4, 1000],
    [5, 70_000],
  ] as const) {
    it(`glues messages from chunks of up to ${maxChunk} bytes`, () => {
      const { bytes, messages } = stream([0, 1, 5, 4, 300, 0, 65_536, 7, 262_144]);
      const got: Uint8Array[] = [];
      const reader = new LengthPrefixedReader(262_144, (m) => got.push(m.slice()));
      const offsets: number[] = [];
      const aligned = new LengthPrefixedReader(262_144, (m) => offsets.push(m.byteOffset));
      let from = 0;
      for (const to of cuts(bytes.byteLength, seed, maxChunk)) {
        // Each chunk in a buffer of its own at an odd offset, as a socket's pool may hand it.
        const chunk = new Uint8Array(to - from + 3).subarray(3);
        chunk.set(bytes.subarray(from, to));
        reader.push(chunk);
        aligned.push(chunk);
        from = to;
      }
      expect(got.map((m) => m.byteLength)).toEqual(messages.map((m) => m.byteLength));
      got.forEach((m, i) =>
        expect(
          m.every((b) => b === i + 1),
          `message ${i}`,
        ).toBe(true),
      );
      for (const o of offsets) expect(o % 8).toBe(0);
    });
  }

  it('copies a message a chunk ends inside into what `allocate` gives, and hands out whole aligned ones as views', () => {
    const { bytes } = stream([296, 8, 40]);
    const allocated: Uint8Array[] = [];
    const got: Uint8Array[] = [];
    const reader = new LengthPrefixedReader(1024, (m) => got.push(m));
    reader.allocate = (n) => {
      allocated.push(new Uint8Array(n + 8).subarray(8));
      return allocated.at(-1)!;
    };
    // The first message is cut in two; the second and third arrive whole, the third at an unaligned offset.
    const chunk = new Uint8Array(bytes.byteLength);
    chunk.set(bytes);
    reader.push(chunk.subarray(0, 100));
    reader.push(chunk.subarray(100));
    expect(got.map((m) => m.byteLength)).toEqual([296, 8, 40]);
    expect(got[0]).toBe(allocated[0]);
    expect(got[1].buffer).toBe(chunk.buffer);
    expect(got[2]).toBe(allocated[1]);
    expect(allocated.length).toBe(2);
    got.forEach((m, i) => expect(m.every((b) => b === i + 1)).toBe(true));
  });

  it('copies every message out of chunks the stream reuses, at every split point, and keeps none as a view', () => {
    // Many messages of varied sizes, bytes that differ within a message (a shifted copy would show).
    const sizes = Array.from({ length: 60 }, (_, i) => [0, 1, 3, 4096, 65_535, 262_144, 100_003][i % 7]);
    const messages = sizes.map((n, i) => Uint8Array.from({ length: n }, (_, j) => (j * 31 + i * 7) & 255));
    const bytes = onTheWire(messages);
    const got: Uint8Array[] = [];
    const reader = new LengthPrefixedReader(262_144, (m) => got.push(m));
    reader.chunksReused = true;
    // One buffer for every read, as a socket with `onread` has; scribbled over once each push returns.
    const readBuffer = new Uint8Array(300_000);
    let from = 0;
    for (const to of cuts(bytes.byteLength, 6, 300_000)) {
      readBuffer.set(bytes.subarray(from, to));
      reader.push(readBuffer.subarray(0, to - from));
      readBuffer.fill(0xee);
      from = to;
    }
    expect(got.length).toBe(messages.length);
    got.forEach((m, i) => {
      expect(m.buffer, `message ${i} is a view of the read buffer`).not.toBe(readBuffer.buffer);
      expect(Buffer.compare(m, messages[i]), `message ${i}`).toBe(0);
    });
  });

  /**
   * Feeds `messages` to a reader as a socket that reads into what it is told would: at most the
   * target's length, sometimes less (as the kernel may). Returns what came out and how many bytes
   * went through the socket's own buffer (copied) rather than straight into their message.
   */
  function readInPlace(messages: Uint8Array[], seed: number): { got: Uint8Array[]; viaOwn: number; total: number } {
    const bytes = onTheWire(messages);
    const got: Uint8Array[] = [];
    const reader = new LengthPrefixedReader(300_000, (m) => got.push(m));
    reader.chunksReused = true;
    // Pooled-size messages get 4 bytes of room behind them (the next length prefix lands there); the rest none.
    reader.allocate = (n) => new Uint8Array(new ArrayBuffer(n >= 100_000 ? 204_804 : n), 0, n);
    const own = new Uint8Array(64 * 1024);
    let viaOwn = 0;
    let x = seed;
    for (let from = 0; from < bytes.byteLength;) {
      const into = reader.readTarget() ?? own;
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const n = Math.min(into.byteLength, bytes.byteLength - from, x % 3 === 0 ? 1 + (x % 5000) : into.byteLength);
      into.set(bytes.subarray(from, from + n));
      if (into === own) viaOwn += n;
      reader.push(into.subarray(0, n));
      if (into === own) own.fill(0xee);
      from += n;
    }
    return { got, viaOwn, total: bytes.byteLength };
  }

  const patterned = (sizes: number[]) =>
    sizes.map((n, i) => Uint8Array.from({ length: n }, (_, j) => (j * 13 + i * 5) & 255));

  it('reads messages in place where readTarget says, and every message still comes out whole', () => {
    // Sizes around the in-place threshold (16 KiB) and the pool's (200 KiB, with 4 bytes of room behind).
    const messages = patterned(
      Array.from({ length: 70 }, (_, i) => [5, 16_383, 16_384, 40_000, 204_800, 3, 150_001][i % 7]),
    );
    const { got, viaOwn, total } = readInPlace(messages, 7);
    expect(got.length).toBe(messages.length);
    got.forEach((m, i) => expect(Buffer.compare(m, messages[i]), `message ${i}`).toBe(0));
    expect(viaOwn).toBeLessThan(total / 2);
  });

  it('reads a run of large messages in place after the first read, the next length landing behind each', () => {
    const messages = patterned(Array.from({ length: 40 }, (_, i) => (i % 2 ? 204_800 : 150_001)));
    const { got, viaOwn } = readInPlace(messages, 11);
    got.forEach((m, i) => expect(Buffer.compare(m, messages[i]), `message ${i}`).toBe(0));
    expect(got.length).toBe(messages.length);
    // Only the first read, before any length is known, goes through the socket's own buffer.
    expect(viaOwn).toBeLessThanOrEqual(64 * 1024);
  });

  it('refuses a length past its cap before keeping any of the message', () => {
    const handled: Uint8Array[] = [];
    const reader = new LengthPrefixedReader(1024, (m) => handled.push(m));
    reader.push(lengthPrefix(16));
    reader.push(new Uint8Array(16));
    expect(() => reader.push(lengthPrefix(1025))).toThrow(OversizedMessage);
    expect(handled.map((m) => m.byteLength)).toEqual([16]);
  });
});
