/**
 * The TypeScript SHA-256 (src/core/sha256.ts), what a page without WebCrypto
 * hashes with, gives node:crypto's digest at every length around the block
 * and padding edges, and the FIPS 180-4 examples' known digests.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PortableSha256, sha256, sha256Portable, sha256Stream, type Sha256Stream } from '../../src/core/sha256.ts';

const hexOf = (b: Uint8Array) => Buffer.from(b).toString('hex');
const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 131 + 7) & 255);

describe('sha256Portable', () => {
  it('gives the FIPS 180-4 examples', () => {
    const text = (s: string) => new TextEncoder().encode(s);
    expect(hexOf(sha256Portable(text('abc')))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hexOf(sha256Portable(text('')))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hexOf(sha256Portable(text('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')))).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
  });

  it('agrees with node:crypto at every length from 0 to 200 bytes, and at 1 MB', () => {
    for (const n of [...Array.from({ length: 201 }, (_, i) => i), 1 << 20]) {
      const b = bytes(n);
      expect(hexOf(sha256Portable(b)), `${n} bytes`).toBe(createHash('sha256').update(b).digest('hex'));
    }
  });

  it('hashes a view as its own bytes, as WebCrypto does', async () => {
    const f = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i)).subarray(3, 90);
    const own = new Uint8Array(f.buffer, f.byteOffset, f.byteLength);
    expect(hexOf(await sha256(f))).toBe(createHash('sha256').update(own).digest('hex'));
    expect(hexOf(sha256Portable(own))).toBe(hexOf(await sha256(f)));
  });
});

describe('sha256Stream', () => {
  /** The message cut at `cuts` (byte offsets), fed piece by piece. */
  const inPieces = (stream: Sha256Stream, message: Uint8Array, cuts: number[]) => {
    let at = 0;
    for (const c of [...cuts, message.length]) {
      stream.update(message.subarray(at, c));
      at = c;
    }
    return hexOf(stream.digest());
  };

  it('gives the digest of the whole message however it is cut, in both the runtime and the TypeScript form', () => {
    const message = bytes(1000);
    const whole = createHash('sha256').update(message).digest('hex');
    const cuttings = [[], [0], [1], [63], [64], [65], [55, 56, 57], [10, 70, 130, 500, 999], [128, 128, 256]];
    for (const cuts of cuttings) {
      expect(inPieces(new PortableSha256(), message, cuts), `portable, cut at ${cuts}`).toBe(whole);
      expect(inPieces(sha256Stream(), message, cuts), `runtime, cut at ${cuts}`).toBe(whole);
    }
    expect(inPieces(new PortableSha256(), new Uint8Array(0), [])).toBe(createHash('sha256').digest('hex'));
  });

  it('hashes a float view as its own bytes', () => {
    const f = Float32Array.from({ length: 100 }, (_, i) => Math.cos(i)).subarray(5, 77);
    const stream = new PortableSha256();
    stream.update(f.subarray(0, 30));
    stream.update(f.subarray(30));
    expect(hexOf(stream.digest())).toBe(hexOf(sha256Portable(new Uint8Array(f.buffer, f.byteOffset, f.byteLength))));
  });
});
