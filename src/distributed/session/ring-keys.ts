/**
 * Who wrote a check value: each peer makes a signing key pair when it starts
 * (WebCrypto Ed25519, else ECDSA P-256: Node, Deno and browsers have one of
 * them) and sends the public half with its join; the server hands every
 * member's public key out in the membership, so all ranks hold the same keys,
 * from the one party none of them can forge. A ring records, per
 * communicator, this rank's private key and every rank's public key
 * (`recordRingKeys`); checks gathered around the ring are then signed by their
 * author (signed-gather.ts) and a relayer cannot rewrite them.
 *
 * A ring with a member that sent no key (an older client) signs nothing, as before.
 */
import type { Communicator } from '../../comm/interface.ts';
import type { Membership } from '../../signaling/client.ts';

/** The algorithms, tried in this order; the key's text says which (`ed25519:…`, `p256:…`). */
const ALGORITHMS = {
  ed25519: { generate: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  p256: { generate: { name: 'ECDSA', namedCurve: 'P-256' }, sign: { name: 'ECDSA', hash: 'SHA-256' } },
} as const;
type AlgorithmName = keyof typeof ALGORITHMS;

/** Bytes of a signature under either algorithm (Ed25519: 64; ECDSA P-256 in WebCrypto's raw r||s: 64). */
export const SIGNATURE_BYTES = 64;

export interface SigningKeys {
  algorithm: AlgorithmName;
  privateKey: CryptoKey;
  /** The public key as the join message carries it: `algorithm:base64(raw)`. */
  publicText: string;
}

export interface RingKeys {
  mine: SigningKeys;
  /** Every rank's public key, by this communicator's rank. */
  byRank: PublicKey[];
}

export interface PublicKey {
  algorithm: AlgorithmName;
  key: CryptoKey;
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

/** A member's key from the membership, or undefined when it is missing or not one of ours. */
export async function importPublicKey(text: string | undefined): Promise<PublicKey | undefined> {
  const m = /^(ed25519|p256):([A-Za-z0-9+/=]+)$/.exec(text ?? '');
  if (!m) return undefined;
  const algorithm = m[1] as AlgorithmName;
  try {
    const key = await crypto.subtle.importKey('raw', fromBase64(m[2]), ALGORITHMS[algorithm].generate, true, [
      'verify',
    ]);
    return { algorithm, key };
  } catch {
    return undefined;
  }
}

export async function sign(keys: SigningKeys, data: BufferSource): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign(ALGORITHMS[keys.algorithm].sign, keys.privateKey, data));
}

export async function verify(key: PublicKey, signature: BufferSource, data: BufferSource): Promise<boolean> {
  try {
    return await crypto.subtle.verify(ALGORITHMS[key.algorithm].sign, key.key, signature, data);
  } catch {
    return false;
  }
}

const ringKeys = new WeakMap<Communicator, RingKeys>();

/**
 * Records the keys of `comm`'s ring: `order[r]` is the membership rank of the communicator's rank r
 * (a ring reordered by round-trip time), absent for the membership's own order. Nothing is recorded
 * unless every member sent a key this runtime can read.
 */
export async function recordRingKeys(
  comm: Communicator,
  membership: Membership,
  mine: SigningKeys | undefined,
  order?: readonly number[],
): Promise<void> {
  if (!mine) return;
  const keys = await Promise.all(membership.peers.map((p) => importPublicKey(p.signingKey)));
  if (keys.some((k) => k === undefined)) return;
  const byRank = Array.from({ length: comm.size }, (_, r) => keys[order ? order[r] : r]!);
  ringKeys.set(comm, { mine, byRank });
}

export function keysOf(comm: Communicator): RingKeys | undefined {
  return ringKeys.get(comm);
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
