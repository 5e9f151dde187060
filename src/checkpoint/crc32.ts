/**
 * CRC-32 (the IEEE 802.3 / zlib polynomial, reflected, 0xEDB88320), in plain
 * TypeScript so that browsers, Deno and Node compute the same value without a
 * native module. Used to notice a checkpoint whose tensor bytes changed after
 * they were written (a flipped bit, a bad copy, a hand edit).
 */
/**
 * Four lookup tables ("slicing by 4"): TABLES[0] is the classic byte table;
 * TABLES[k][n] is the CRC of byte n followed by k zero bytes, so one step can
 * fold four input bytes with four lookups instead of four dependent rounds.
 */
const TABLES = (() => {
  const t = Array.from({ length: 4 }, () => new Uint32Array(256));
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[0][n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    for (let k = 1; k < 4; k++) t[k][n] = (t[k - 1][n] >>> 8) ^ t[0][t[k - 1][n] & 0xff];
  }
  return t;
})();

export function crc32(bytes: Uint8Array): number {
  const [t0, t1, t2, t3] = TABLES;
  let c = 0xffffffff;
  let i = 0;
  for (const end = bytes.length - 3; i < end; i += 4) {
    c ^= bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    c = t3[c & 0xff] ^ t2[(c >>> 8) & 0xff] ^ t1[(c >>> 16) & 0xff] ^ t0[c >>> 24];
  }
  for (; i < bytes.length; i++) c = t0[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** The form stored in checkpoint metadata: 8 lowercase hex digits. */
export function crc32Hex(bytes: Uint8Array): string {
  return crc32(bytes).toString(16).padStart(8, '0');
}
