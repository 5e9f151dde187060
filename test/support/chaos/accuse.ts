/**
 * lie-accuse: the liar of issue 37 that frames its left neighbour. From its step on it sends NaN
 * into the ring after publishing honest checks (as lie-nan), and in its verify-verdicts block it
 * claims that what its left neighbour sent it sketches to NaN: "the poison I pass on is what I was
 * given". It keeps the hashes true (a false hash is only its word against the neighbour's) and signs
 * the block as its author, as the protocol asks (signed-gather.ts). The neighbour's own signed digest
 * says what it sent; the liar's received bytes, which it must show, say the same.
 */
import type { Communicator } from '../../../src/comm/interface.ts';
import { allgather } from '../../../src/collectives/allgather.ts';
import { FAST_STEP_BIT } from '../../../src/collectives/controller/negotiate.ts';
import { receives, sha256 } from '../../../src/collectives/robust/link-digests.ts';
import { ringChunks } from '../../../src/collectives/robust/verified.ts';
import { PHASE_ALLGATHER } from '../../../src/collectives/transfer/ring.ts';
import { VERIFY_BUCKETS } from '../../../src/distributed/robust/step-checks.ts';
import { verdictWords } from '../../../src/distributed/robust/verify-verdicts.ts';
import { keysOf, SIGNATURE_BYTES } from '../../../src/distributed/session/ring-keys.ts';
import { signedAllgather, signedAsAuthor } from '../../../src/distributed/session/signed-gather.ts';
import { interceptSends } from '../intercept-sends.ts';

/** Words per chunk of a verdict block (verify-verdicts.ts). */
const WORDS_PER_CHUNK = verdictWords(1, VERIFY_BUCKETS);

/** Bytes of a cached agreement's fingerprint in front of a fast path's first message to a peer (collectives/controller/run.ts). */
const FINGERPRINT_BYTES = 12;

const accusing = new WeakSet<Communicator>();

/** A ring allgather's first hop carries the sender's own block (collectives/transfer/ring.ts). */
function isOwnBlock(tag: { step: number }): boolean {
  const step = tag.step & ~FAST_STEP_BIT;
  return step >>> 16 === PHASE_ALLGATHER && (step & 0xffff) === 0;
}

/**
 * From now on, while `stepNow()` is at or past `fromStep`, this rank's verdict blocks carry the false
 * claim, and it joins the evidence gathers the others then hold, showing zeros for the bytes it says it
 * received (its own honest code, which judges its own block as it was before the rewrite, would not).
 * `gradientLength`: the floats of the gradient the verified allreduce reduces (its ring chunks).
 */
export function accuseOnSend(
  comm: Communicator,
  fromStep: number,
  stepNow: () => number,
  gradientLength: number,
): void {
  if (accusing.has(comm)) return;
  accusing.add(comm);
  interceptSends(comm, (send) => (peer, tag, payload) => {
    const step = stepNow();
    const keys = keysOf(comm);
    const trailer = keys ? 2 * SIGNATURE_BYTES : 0;
    // On a cached agreement's fast path the first message to each peer starts with its fingerprint (run.ts).
    const front = [0, FINGERPRINT_BYTES].find((f) => {
      const words = (payload.byteLength - f - trailer) / 4;
      return words > 0 && words % WORDS_PER_CHUNK === 0;
    });
    if (step < fromStep || !isOwnBlock(tag) || front === undefined) return send(peer, tag, payload);
    const words = (payload.byteLength - front - trailer) / 4;
    const n = words / WORDS_PER_CHUNK;
    const values = new Int32Array(new Uint8Array(payload.subarray(front, front + 4 * words)).buffer);
    // The received sketches are the block's last k·n words.
    new Float32Array(values.buffer, 4 * (words - VERIFY_BUCKETS * n)).fill(NaN);
    showEvidence(comm, step, gradientLength);
    const withFront = (block: Uint8Array) => {
      const out = new Uint8Array(front + block.byteLength);
      out.set(payload.subarray(0, front));
      out.set(block, front);
      return out;
    };
    if (!keys) return send(peer, tag, withFront(new Uint8Array(values.buffer)));
    return signedAsAuthor(keys, { name: 'verify-verdicts', step }, comm.rank, values).then((block) =>
      send(peer, tag, withFront(new Uint8Array(block.buffer))),
    );
  });
}

/**
 * Joins the evidence gather and the signed gather of its hashes after it (called while the verdict gather
 * runs, so they take the next collectives' places).
 */
function showEvidence(comm: Communicator, step: number, gradientLength: number): void {
  const chunks = ringChunks(gradientLength, comm.size, undefined, 0, 0);
  const words = chunks.reduce((n, c) => n + (receives(c, comm.rank, comm.size) ? c.count : 0), 0);
  const shown = new Float32Array(words);
  void allgather(comm, shown, { name: 'verify-evidence' })
    .then(async () => signedAllgather(comm, await sha256(shown), { name: 'verify-evidence-hash', step }))
    .catch(() => {});
}
