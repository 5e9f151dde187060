/**
 * A peer's signing key pair (WebCrypto Ed25519, else ECDSA P-256: Node, Deno and browsers in a secure
 * context have one of them). Its public half travels in the join (`signingKey`), and the server
 * refuses a join without one it can read (server/signing-key.ts); what is signed with it and how the
 * ring checks it is src/distributed/session/ring-keys.ts and signed-gather.ts.
 */

/** The algorithms, tried in this order; the key's text says which (`ed25519:…`, `p256:…`). */
export const ALGORITHMS = {
  ed25519: { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  p256: { generate: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } },
} as const;
export type AlgorithmName = keyof typeof ALGORITHMS;

/** Bytes of a signature under either algorithm (Ed25519: 64; ECDSA P-256 in WebCrypto's raw r||s: 64). */
export const SIGNATURE_BYTES = 64;

export interface SigningKeys {
  algorithm: AlgorithmName;
  privateKey: CryptoKey;
  /** The public key as the join message carries it: `algorithm:base64(raw)`. */
  publicText: string;
}

/** A fresh key pair of the first algorithm this runtime has. */
export async function newSigningKeys(): Promise<SigningKeys | undefined> {
  for (const algorithm of Object.keys(ALGORITHMS) as AlgorithmName[]) {
    try {
      const pair = (await crypto.subtle.generateKey(ALGORITHMS[algorithm].generate, true, [
        'sign',
        'verify',
      ])) as CryptoKeyPair;
      const raw = new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey));
      return { algorithm, privateKey: pair.privateKey, publicText: `${algorithm}:${toBase64(raw)}` };
    } catch {
      // not in this runtime: the next one
    }
  }
  return undefined;
}

export function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const s = atob(text);
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}
