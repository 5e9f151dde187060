/**
 * SHA-256 (FIPS 180-4) of bytes: WebCrypto's where the runtime has it (Node,
 * Deno, a page in a secure context), else the same function in TypeScript. A
 * page served over plain http from another host has no `crypto.subtle`, and
 * the ring's state check (src/distributed/robust/state-agreement.ts) compares digests
 * across runtimes, so every rank must compute the same one whatever it has.
 */

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

/** The TypeScript SHA-256 (no WebCrypto): the message in 64-byte blocks, then the padded tail. */
export function sha256Portable(message: Uint8Array): Uint8Array {
  const h = H0.slice();
  const w = new Uint32Array(64);
  const whole = message.length - (message.length % 64);
  for (let at = 0; at < whole; at += 64) compress(h, w, message, at);
  // The tail, a 1 bit, zeros, and the length in bits as a 64-bit big-endian number (5.1.1).
  const tail = new Uint8Array(message.length % 64 < 56 ? 64 : 128);
  tail.set(message.subarray(whole));
  tail[message.length - whole] = 0x80;
  const bits = message.length * 8;
  const view = new DataView(tail.buffer);
  view.setUint32(tail.length - 8, Math.floor(bits / 2 ** 32));
  view.setUint32(tail.length - 4, bits >>> 0);
  for (let at = 0; at < tail.length; at += 64) compress(h, w, tail, at);
  const out = new Uint8Array(32);
  const outView = new DataView(out.buffer);
  h.forEach((v, i) => outView.setUint32(i * 4, v));
  return out;
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
