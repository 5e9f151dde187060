/**
 * SHA-256 (FIPS 180-4) of bytes: WebCrypto's where the runtime has it (Node,
 * Deno, a page in a secure context), else the same function in TypeScript. A
 * page served over plain http from another host has no `crypto.subtle`, and
 * the ring's state check (src/distributed/robust/state-agreement.ts) compares digests
 * across runtimes, so every rank must compute the same one whatever it has.
 * `sha256Stream` hashes what is too big to hold whole, a piece at a time.
 */
import { nodeBuiltin } from './runtime.ts';

/** The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4, 4.2.2). */
const K = Uint32Array.from(firstPrimes(64), (p) => fraction32(Math.cbrt(p)));
/** The first 32 bits of the fractional parts of the square roots of the first 8 primes (5.3.3). */
const H0 = Uint32Array.from(firstPrimes(8), (p) => fraction32(Math.sqrt(p)));

function firstPrimes(n: number): number[] {
  const primes: number[] = [];
  for (let c = 2; primes.length < n; c++) if (primes.every((p) => c % p !== 0)) primes.push(c);
  return primes;
}

function fraction32(x: number): number {
  return ((x - Math.floor(x)) * 2 ** 32) >>> 0;
}

export async function sha256(bytes: ArrayBufferView): Promise<Uint8Array> {
  const subtle = globalThis.crypto?.subtle;
  if (subtle) return new Uint8Array(await subtle.digest('SHA-256', bytes as ArrayBufferView<ArrayBuffer>));
  return sha256Portable(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

/** The TypeScript SHA-256 (no WebCrypto) of one message. */
export function sha256Portable(message: Uint8Array): Uint8Array {
  const hash = new PortableSha256();
  hash.update(message);
  return hash.digest();
}

/**
 * SHA-256 over bytes given in pieces: the digest of their concatenation. WebCrypto has no such
 * form, so something too big to hold whole (a model's state, read back a slice at a time) is
 * hashed with Node's `node:crypto` where the runtime has it (Node, Deno), else in TypeScript.
 */
export interface Sha256Stream {
  update(bytes: ArrayBufferView): void;
  /** The digest of everything given; the stream takes nothing after it. */
  digest(): Uint8Array;
}

interface NodeCrypto {
  createHash(algorithm: 'sha256'): { update(bytes: Uint8Array): unknown; digest(): Uint8Array };
}

export function sha256Stream(): Sha256Stream {
  const crypto = nodeBuiltin<NodeCrypto>('node:crypto');
  if (!crypto) return new PortableSha256();
  const hash = crypto.createHash('sha256');
  return { update: (bytes) => void hash.update(bytesOf(bytes)), digest: () => new Uint8Array(hash.digest()) };
}

function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** The TypeScript SHA-256 in pieces: whole 64-byte blocks as they come, the rest kept for the next piece. */
export class PortableSha256 implements Sha256Stream {
  private readonly h = H0.slice();
  private readonly w = new Uint32Array(64);
  private readonly block = new Uint8Array(64);
  private filled = 0;
  private length = 0;

  update(view: ArrayBufferView): void {
    const bytes = bytesOf(view);
    this.length += bytes.length;
    let at = 0;
    if (this.filled > 0) {
      at = Math.min(64 - this.filled, bytes.length);
      this.block.set(bytes.subarray(0, at), this.filled);
      this.filled += at;
      if (this.filled < 64) return;
      compress(this.h, this.w, this.block, 0);
      this.filled = 0;
    }
    const whole = at + Math.floor((bytes.length - at) / 64) * 64;
    for (; at < whole; at += 64) compress(this.h, this.w, bytes, at);
    this.block.set(bytes.subarray(at));
    this.filled = bytes.length - at;
  }

  digest(): Uint8Array {
    // The tail, a 1 bit, zeros, and the length in bits as a 64-bit big-endian number (5.1.1).
    const tail = new Uint8Array(this.filled < 56 ? 64 : 128);
    tail.set(this.block.subarray(0, this.filled));
    tail[this.filled] = 0x80;
    const bits = this.length * 8;
    const view = new DataView(tail.buffer);
    view.setUint32(tail.length - 8, Math.floor(bits / 2 ** 32));
    view.setUint32(tail.length - 4, bits >>> 0);
    for (let at = 0; at < tail.length; at += 64) compress(this.h, this.w, tail, at);
    const out = new Uint8Array(32);
    const outView = new DataView(out.buffer);
    this.h.forEach((v, i) => outView.setUint32(i * 4, v));
    return out;
  }
}

const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));

/** One 64-byte block into the state `h` (6.2.2); `w` is the message schedule's room. */
function compress(h: Uint32Array, w: Uint32Array, bytes: Uint8Array, at: number): void {
  for (let t = 0; t < 16; t++) {
    const i = at + t * 4;
    w[t] = (bytes[i] << 24) | (bytes[i + 1] << 16) | (bytes[i + 2] << 8) | bytes[i + 3];
  }
  for (let t = 16; t < 64; t++) {
    const s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >>> 3);
    const s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >>> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  let [a, b, c, d, e, f, g, hh] = h;
  for (let t = 0; t < 64; t++) {
    const t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
    const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += hh;
}
