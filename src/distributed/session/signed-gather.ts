/**
 * An allgather of check values (norms, sketches, verdicts) that a relayer
 * cannot rewrite. The ring allgather passes each rank's block on through the
 * others, so without signatures a rank in the middle could change the norm it
 * forwards and every rank after it would blame the block's author.
 *
 * Each block travels as [values | author's signature | hop signature]. Its
 * author signs [what, step, its rank, values] with the key the server handed
 * out (ring-keys.ts); each rank that passes a block on signs, in the hop slot,
 * that it passed on exactly these bytes. Every rank checks both as a block
 * arrives, before passing it on (collectives/transfer/ring.ts's VetBlock):
 *  - the author's signature fails under a valid hop signature: the rank it
 *    came from passed on a block it knew was rewritten, and the bytes prove it.
 *    That rank is named here, and the proof rides in the abort note to every
 *    rank (`proofOf`), where `provenRelayer` checks it and names it too: a
 *    majority reports it and the server ejects it;
 *  - the hop signature fails: the rank it came from is named on this rank's
 *    word alone (the bytes prove nothing), which ejects nobody by itself.
 * An honest rank never passes on a block that fails, so the rank named is the
 * one that changed it; the author is never blamed for it.
 *
 * A ring without every member's key (ring-keys.ts) gathers unsigned.
 * Cost per gather and rank: size-1 signatures (its own block and the hops it
 * passes on), about 2·(size-1) verifications, 128 bytes per block.
 */
import { allgather } from '../../collectives/allgather.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import { fromBase64, keysOf, sign, SIGNATURE_BYTES, toBase64, verify, type RingKeys } from './ring-keys.ts';

export interface SignedGatherOptions {
  /** The collective's name; signed with the values, so a block cannot be passed off as another gather's. */
  name: string;
  /** The training step the values belong to (signed too: an older block cannot be replayed). */
  step: number;
  timeoutMs?: number;
  misbehaviour?: MisbehaviourSink;
}

/** What a rank that caught a relayer sends every rank in its abort note (`detail.relayProof`). */
export interface RelayProof {
  name: string;
  step: number;
  author: number;
  relayer: number;
  /** The block as the relayer handed it over, base64. */
  block: string;
}

const SIGNATURE_WORDS = SIGNATURE_BYTES / 4;
/** Words a block carries beyond its values: the author's signature, then the hop signature. */
const TRAILER_WORDS = 2 * SIGNATURE_WORDS;

/** Every rank's `data` in rank order (every block the same length), each checked against its author's key. */
export async function signedAllgather<T extends Float32Array | Int32Array>(
  comm: Communicator,
  data: T,
  o: SignedGatherOptions,
): Promise<T> {
  return (await startSignedAllgather(comm, data, o)).gathered;
}

/**
 * signedAllgather in two halves: resolves once this rank's block is signed and the gather has
 * begun, with the gather's result to come. A gather meant to run beside another collective (the step
 * checks' beside the gradient allreduce) must begin before it: signing first keeps that so.
 */
export async function startSignedAllgather<T extends Float32Array | Int32Array>(
  comm: Communicator,
  data: T,
  o: SignedGatherOptions,
): Promise<{ gathered: Promise<T> }> {
  const keys = keysOf(comm);
  if (!keys) return { gathered: allgather(comm, data, { name: o.name, timeoutMs: o.timeoutMs }) };
  const mine = await signedAsAuthor(keys, o, comm.rank, new Int32Array(data.buffer, data.byteOffset, data.length));
  const all = allgather(comm, mine, {
    name: o.name,
    timeoutMs: o.timeoutMs,
    vet: (author, payload, from, forwarding) => vetBlock(comm, keys, o, { author, payload, from, forwarding }),
  });
  return { gathered: all.then((blocks) => valuesOf(blocks, data, comm.size)) };
}

/** `values` as rank `author` puts them in the gather: followed by its signature and an empty hop slot. */
export async function signedAsAuthor(
  keys: RingKeys,
  o: Pick<SignedGatherOptions, 'name' | 'step'>,
  author: number,
  values: Int32Array,
): Promise<Int32Array<ArrayBuffer>> {
  const words = values.length;
  const block = new Int32Array(words + TRAILER_WORDS);
  block.set(values);
  const signature = await sign(keys.mine, authorBytes(o, author, byteView(block, 0, words * 4)));
  block.set(new Int32Array(signature.buffer, signature.byteOffset, SIGNATURE_WORDS), words);
  return block;
}

/** The gathered values without their signatures, as the caller's array type. */
function valuesOf<T extends Float32Array | Int32Array>(all: Int32Array, like: T, size: number): T {
  const words = like.length;
  const out = new (like.constructor as new (n: number) => T)(words * size);
  const outWords = new Int32Array(out.buffer, out.byteOffset, out.length);
  for (let r = 0; r < size; r++) {
    const at = r * (words + TRAILER_WORDS);
    outWords.set(all.subarray(at, at + words), r * words);
  }
  return out;
}

interface Arrival {
  author: number;
  payload: Uint8Array;
  from: number;
  forwarding: boolean;
}

/** Throws naming `from` when the block is not as its author signed it; else the bytes to pass on, signed for this hop. */
async function vetBlock(comm: Communicator, keys: RingKeys, o: SignedGatherOptions, a: Arrival): Promise<Uint8Array> {
  const { author, payload, from } = a;
  const signedLength = payload.byteLength - SIGNATURE_BYTES;
  if (!(signedLength >= SIGNATURE_BYTES && signedLength % 4 === 0) || !keys.byRank[author] || !keys.byRank[from])
    return refuse(comm, o, a, `its ${o.name} block for rank ${author} is not a signed block`);
  const handedOver = from === author || (await hopSignatureHolds(keys, o, a));
  if (!handedOver)
    return refuse(comm, o, a, `the ${o.name} block of rank ${author} it passed on does not carry its signature`);
  if (!(await authorSignatureHolds(keys, o, author, payload))) {
    const proof: RelayProof | undefined =
      from === author ? undefined : { name: o.name, step: o.step, author, relayer: from, block: toBase64(payload) };
    return refuse(comm, o, a, rewriteReason(o, author, from), proof);
  }
  return a.forwarding ? signedForHop(keys, o, comm.rank, author, payload) : payload;
}

/**
 * `payload` (a block of `author`'s) as rank `by` passes it on: a copy whose hop slot holds `by`'s
 * signature over the rest ("I passed on exactly these bytes").
 */
export async function signedForHop(
  keys: RingKeys,
  o: Pick<SignedGatherOptions, 'name' | 'step'>,
  by: number,
  author: number,
  payload: Uint8Array,
): Promise<Uint8Array> {
  const signedLength = payload.byteLength - SIGNATURE_BYTES;
  // Not payload.slice(): a block received over WebRTC may be a Node Buffer, whose slice() is a view, and
  // signing into it would rewrite the hop slot of the block this rank received.
  const onward = new Uint8Array(payload);
  onward.set(await sign(keys.mine, hopBytes(o, by, author, onward.subarray(0, signedLength))), signedLength);
  return onward;
}

function rewriteReason(o: SignedGatherOptions, author: number, from: number): string {
  return from === author
    ? `its own ${o.name} block does not carry its signature`
    : `it passed on rank ${author}'s ${o.name} block changed (its author's signature does not match): a relayer that rewrites what it forwards`;
}

async function authorSignatureHolds(
  keys: RingKeys,
  o: SignedGatherOptions,
  author: number,
  payload: Uint8Array,
): Promise<boolean> {
  const valuesLength = payload.byteLength - 2 * SIGNATURE_BYTES;
  const signature = payload.slice(valuesLength, valuesLength + SIGNATURE_BYTES);
  return verify(keys.byRank[author], signature, authorBytes(o, author, byteView(payload, 0, valuesLength)));
}

async function hopSignatureHolds(keys: RingKeys, o: SignedGatherOptions, a: Arrival): Promise<boolean> {
  const signedLength = a.payload.byteLength - SIGNATURE_BYTES;
  const hop = a.payload.slice(signedLength);
  return verify(keys.byRank[a.from], hop, hopBytes(o, a.from, a.author, byteView(a.payload, 0, signedLength)));
}

/** Names `a.from` (to the sink, and as `peer-misbehaved`) and throws, with the proof for the others when there is one. */
function refuse(comm: Communicator, o: SignedGatherOptions, a: Arrival, why: string, proof?: RelayProof): never {
  const reason = `step ${o.step}: ${why}`;
  o.misbehaviour?.peerMisbehaved({ rank: comm.rank, peer: a.from, reason });
  if (comm.events.active)
    comm.events.emit({ type: 'peer-misbehaved', t: now(), rank: comm.rank, peer: a.from, reason });
  throw new RingtrainError(
    ErrorCode.PeerMisbehaved,
    `rank ${a.from}: ${why}; step ${o.step} was dropped, no update applied. Rank ${a.from} is named, not rank ${a.author}: an elastic job ejects it once most ranks report it`,
    { peer: a.from, culprits: [a.from], step: o.step, author: a.author, ...(proof ? { relayProof: proof } : {}) },
  );
}

/** The relay proof an error carries (another rank's abort note), if it has one of the right shape. */
export function proofOf(detail: Record<string, unknown> | undefined): RelayProof | undefined {
  const p = detail?.relayProof as Partial<RelayProof> | undefined;
  if (typeof p !== 'object' || p === null) return undefined;
  const ints = [p.step, p.author, p.relayer].every((v) => Number.isInteger(v));
  return ints && typeof p.name === 'string' && typeof p.block === 'string' ? (p as RelayProof) : undefined;
}

/**
 * The relayer a proof convicts on `comm`'s ring: its own hop signature vouches for a block whose
 * author's signature fails. Null when the proof does not hold (it then names no one: whoever made
 * it up cannot be told from the relayer).
 */
export async function provenRelayer(comm: Communicator, proof: RelayProof): Promise<number | null> {
  const keys = keysOf(comm);
  if (!keys || proof.author === proof.relayer || !keys.byRank[proof.author] || !keys.byRank[proof.relayer]) return null;
  let payload: Uint8Array;
  try {
    payload = fromBase64(proof.block);
  } catch {
    return null;
  }
  if (payload.byteLength < 2 * SIGNATURE_BYTES || payload.byteLength % 4 !== 0) return null;
  const o = { name: proof.name, step: proof.step };
  const arrival = { author: proof.author, payload, from: proof.relayer, forwarding: false };
  const vouched = await hopSignatureHolds(keys, o, arrival);
  return vouched && !(await authorSignatureHolds(keys, o, proof.author, payload)) ? proof.relayer : null;
}

function byteView(a: ArrayBufferView, from: number, length: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset + from, length);
}

/** What an author signs: the gather's name, the step and its rank, then its values. */
function authorBytes(o: Pick<SignedGatherOptions, 'name' | 'step'>, author: number, values: Uint8Array) {
  return labelled(`ringtrain-check\0${o.name}\0${o.step}\0${author}\0`, values);
}

/** What a rank that passes a block on signs: that it, `by`, passed on these bytes of `author`'s block. */
function hopBytes(o: Pick<SignedGatherOptions, 'name' | 'step'>, by: number, author: number, block: Uint8Array) {
  return labelled(`ringtrain-hop\0${o.name}\0${o.step}\0${author}\0${by}\0`, block);
}

function labelled(label: string, bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const head = new TextEncoder().encode(label);
  const out = new Uint8Array(head.byteLength + bytes.byteLength);
  out.set(head);
  out.set(bytes, head.byteLength);
  return out;
}
