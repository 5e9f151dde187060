/**
 * 32-bit FNV-1a: the project's one fingerprint for names and layouts (tensor
 * sets, checkpoint layouts, model files). Not cryptographic: it tells
 * different inputs apart by chance, never against someone choosing them.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** A string hashes its UTF-16 code units; bytes hash as bytes. */
export function fnv1a32(input: string | Uint8Array): number {
  let h = FNV_OFFSET;
  if (typeof input === 'string') {
    for (let i = 0; i < input.length; i++) h = Math.imul(h ^ input.charCodeAt(i), FNV_PRIME);
  } else {
    for (const b of input) h = Math.imul(h ^ b, FNV_PRIME);
  }
  return h >>> 0;
}

/** `fnv1a32` as 8 hex digits. */
export function fnv1aHex(input: string | Uint8Array): string {
  return fnv1a32(input).toString(16).padStart(8, '0');
}
