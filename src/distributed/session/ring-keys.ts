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
 * The server refuses a join without a readable key (server/signing-key.ts); a ring in which some
 * member's key cannot be imported here (an algorithm this runtime lacks) signs nothing.
 */
import type { Communicator } from '../../comm/interface.ts';
import type { Membership } from '../../signaling/client.ts';
import { ALGORITHMS, fromBase64, type AlgorithmName, type SigningKeys } from '../../signaling/signing-keys.ts';

export {
  newSigningKeys,
  SIGNATURE_BYTES,
  toBase64,
  fromBase64,
  type SigningKeys,
} from '../../signaling/signing-keys.ts';

export interface RingKeys {
  mine: SigningKeys;
  /** Every rank's public key, by this communicator's rank. */
  byRank: PublicKey[];
}

export interface PublicKey {
  algorithm: AlgorithmName;
  key: CryptoKey;
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
