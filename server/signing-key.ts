/**
 * The server's check of a joiner's signing key. Every member signs the check values it publishes
 * (src/distributed/session/ring-keys.ts), and a ring signs only when every member's key can be read:
 * a member that joined without one, or with one no runtime can import (a P-256 "point" that is not
 * on the curve), would turn signing off for its whole ring, and with it the naming of a relayer
 * that rewrites what it forwards. So the join is refused instead, before the joiner is anybody's
 * neighbour. Every ringtrain runtime makes a key (Node, Deno, and pages in a secure context, which
 * WebGPU needs as well).
 *
 * node:crypto checks the key synchronously, from the same bytes WebCrypto imports: Ed25519's 32
 * bytes, or P-256's uncompressed point (0x04, x, y), which must lie on the curve.
 */
import { createPublicKey } from 'node:crypto';

const KEY_TEXT = /^(ed25519|p256):([A-Za-z0-9+/]+={0,2})$/;

/** Why `text` is not a signing key members can check, or null when it is one. */
export function signingKeyProblem(text: string | undefined): string | null {
  if (text === undefined) return 'the join carries no signing key';
  const m = KEY_TEXT.exec(text);
  if (!m) return "the join's signing key is not 'ed25519:<base64>' or 'p256:<base64>'";
  const raw = Buffer.from(m[2], 'base64');
  try {
    if (m[1] === 'ed25519') {
      if (raw.length !== 32) return `the join's Ed25519 key has ${raw.length} bytes, not 32`;
      createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
    } else {
      if (raw.length !== 65 || raw[0] !== 4)
        return "the join's P-256 key is not an uncompressed point (65 bytes, starting 0x04)";
      const [x, y] = [raw.subarray(1, 33), raw.subarray(33)].map((b) => b.toString('base64url'));
      createPublicKey({ key: { kty: 'EC', crv: 'P-256', x, y }, format: 'jwk' });
    }
  } catch {
    return `the join's ${m[1] === 'ed25519' ? 'Ed25519' : 'P-256'} key is not a valid public key`;
  }
  return null;
}
