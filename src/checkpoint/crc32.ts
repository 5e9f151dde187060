/**
 * CRC-32 (the IEEE 802.3 / zlib polynomial, reflected, 0xEDB88320), in plain
 * TypeScript so that browsers, Deno and Node compute the same value without a
 * native module. Used to notice a checkpoint whose tensor bytes changed after
 * they were written (a flipped bit, a bad copy, a hand edit).
 */
const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** The form stored in checkpoint metadata: 8 lowercase hex digits. */
export function crc32Hex(bytes: Uint8Array): string {
  return crc32(bytes).toString(16).padStart(8, '0');
}
