/**
 * The verified allreduce's judgement after the sum (step-checks.ts calls it before the update). Every
 * rank shares, in one signed allgather, per ring chunk: the SHA-256 of the sum it holds, its
 * contribution's sketch and masses (verified.ts's chunkSketches) and its link digest (link-digests.ts:
 * the hash and sketch of what it sent in reduce-scatter, the sketch of what it received). The sketches'
 * seed is drawn from the sum's hashes (sketch.ts's revealedSeed): commit, then reveal. A rank's
 * contribution is in the sum, and the bytes it sent are fixed by hashes it signs, before anyone can know
 * the seed, so no change can be aimed at the sketch's null space. Every sketch is taken in one pass per
 * chunk (link-digests.ts's stepSketches). Then every rank judges alike:
 *
 *  1. a copy of a chunk that differs from its owner's (the allgather forwards it byte for byte) names
 *     the link into the first rank that holds it wrong, as before;
 *  2. a rank whose own signed digests contradict its published contribution, who signed a sketch the
 *     bytes do not have (shown by the receiver in an evidence gather, run only when the two ends of a
 *     hop signed different sketches, the bytes' hashes signed in a small gather after it), or whose
 *     last step (the chunk it owns) does not add up, is named: proven by what it signed, whatever
 *     anyone claims about it;
 *  3. otherwise the hops whose receiver showed other bytes than the sender hashed (one end's word
 *     against the other's) and the chunks whose sum is not the published one locate one link as before
 *     (verified.ts's culpritOf and suspectLinks), and its sender is named.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { revealedSeed } from '../../collectives/robust/sketch.ts';
import { culpritOf, suspectLinks, wrongChunksOf, type RingChunk } from '../../collectives/robust/verified.ts';
import {
  chunkHashes,
  digestFromWords,
  digestToWords,
  digestWords,
  evidenceOf,
  HASH_WORDS,
  judgeEvidence,
  judgeHops,
  sends,
  sha256,
  stepSketches,
  type EvidenceFindings,
  type Hop,
  type HopFindings,
  type HopInput,
  type LinkDigest,
  type ProvenFault,
} from '../../collectives/robust/link-digests.ts';
import { allgather } from '../../collectives/allgather.ts';
import { signedAllgather } from '../session/signed-gather.ts';

export interface VerifiedStep {
  comm: Communicator;
  step: number;
  chunks: RingChunk[];
  /** Buckets per chunk sketch. */
  k: number;
  /** This rank's contribution as its checks saw it, and each rank's factor (what it sends is the product). */
  contribution: Float32Array;
  factors: number[];
  /** What this rank sent and received in reduce-scatter, where it lies in the gradient. */
  sent: Float32Array;
  received: Float32Array;
  timeoutMs?: number;
  misbehaviour?: MisbehaviourSink;
}

/** Words of one rank's verdict block: per chunk, the hash of the sum it holds, its contribution's sketch and masses, its link digest. */
export function verdictWords(chunks: number, k: number): number {
  return HASH_WORDS * chunks + 2 * k * chunks + digestWords(chunks, k);
}

interface Verdict {
  sumHash: Int32Array;
  /** The contribution's per-chunk sketches and masses (verified.ts's chunkSketches), as published. */
  own: Float32Array;
  digest: LinkDigest;
}

/** Throws ERR_PEER_MISBEHAVED (or another error) when the sum is not what the published checks say, on every rank alike. */
export async function judgeVerifiedStep(
  v: VerifiedStep,
  reduced: Float32Array,
  scale: number,
  prescale: number,
): Promise<void> {
  const { comm, chunks, k } = v;
  const n = chunks.length;
  // Neither hash needs the seed.
  const [sumHash, sentHash] = await Promise.all([
    chunkHashes(reduced, chunks, (c) => c.count > 0),
    chunkHashes(v.sent, chunks, (c) => sends(c, comm.rank)),
  ]);
  // Revealed only now: every rank has sent all it contributes, so none could aim at this seed's null space.
  const seed = revealedSeed(v.step, sumHash);
  const sketched = stepSketches({ ...v, reduced }, chunks, k, seed, comm.rank, comm.size);
  const mine = new Int32Array(verdictWords(n, k));
  mine.set(sumHash);
  mine.set(new Int32Array(sketched.own.buffer), HASH_WORDS * n);
  const digest = { sentHash, sentSketch: sketched.sent, receivedSketch: sketched.received };
  mine.set(digestToWords(digest), HASH_WORDS * n + 2 * k * n);
  const all = await signedAllgather(comm, mine, gatherOptions(v, 'verify-verdicts'));
  const ranks = Array.from({ length: comm.size }, (_, r) => r);
  const verdicts = ranks.map((r) => verdictOf(all.slice(r * mine.length, (r + 1) * mine.length), n, k));
  // The allgather forwards each chunk byte for byte from its owner: a copy that differs names the link into it.
  const differs = ranks.map((r) =>
    chunks.flatMap((c, i) => (c.owner >= 0 && !sameHash(verdicts, r, c.owner, i) ? [i] : [])),
  );
  if (differs.some((d) => d.length > 0))
    nameFromClaims(
      v,
      reduced,
      differs,
      ranks.map(() => []),
    );
  // Every rank holds the same sum, so all drew the same seed.
  const input: HopInput = {
    size: comm.size,
    chunks,
    k,
    prescale,
    published: ranks.map((r) => verdicts[r].own.map((x) => x * v.factors[r])),
    digests: verdicts.map((d) => d.digest),
  };
  const found = judgeHops(input);
  const proven = [...found.proven];
  const settled = await settleDisputes(v, input, found.disputes, seed);
  // First: a rank named for an accusation it cannot back is named for that, whatever else it did.
  proven.unshift(...settled.proven);
  const wrong = wrongChunksOf(sketched.result, chunks, input.published, k, scale);
  proven.push(...lastStepFaults(wrong, reduced, chunks, found));
  if (proven.length > 0) nameProven(v, proven);
  // Only a receiver's word now: the hops whose bytes are not what the sender signed, as the partials it received wrong.
  const badAt = ranks.map((r) => [...new Set(settled.unresolved.filter((h) => h.to === r).map((h) => h.chunk))]);
  if (wrong.length === 0 && badAt.every((b) => b.length === 0)) return;
  nameFromClaims(
    v,
    reduced,
    ranks.map(() => wrong),
    badAt,
  );
}

/** The receivers of disputed hops show the bytes they received (an evidence gather, only when there are disputes). */
async function settleDisputes(
  v: VerifiedStep,
  input: HopInput,
  disputes: Hop[],
  seed: number,
): Promise<EvidenceFindings> {
  if (disputes.length === 0) return { proven: [], unresolved: [] };
  const { comm, chunks } = v;
  const evidence = evidenceOf(comm.rank, disputes, chunks, comm.size, v.received);
  // The bytes travel unsigned: a block this long spans several messages, which signed-gather.ts's
  // per-message check does not take. Their authors sign the bytes' hashes in a small gather after them.
  const shown = await allgather(comm, evidence, { name: 'verify-evidence', timeoutMs: v.timeoutMs });
  const signed = await signedAllgather(comm, await sha256(evidence), gatherOptions(v, 'verify-evidence-hash'));
  const blocks = Array.from({ length: comm.size }, (_, r) =>
    shown.subarray(r * evidence.length, (r + 1) * evidence.length),
  );
  const changed: number[] = [];
  for (const r of new Set(disputes.map((h) => h.to)))
    if (!sameWords(await sha256(blocks[r]), signed.subarray(HASH_WORDS * r, HASH_WORDS * (r + 1)))) changed.push(r);
  // A relayer changed them: they would convict their author of a claim it never made. Nobody is named from them.
  if (changed.length > 0)
    throw new RingtrainError(
      ErrorCode.Aborted,
      `step ${v.step} failed verification: the bytes rank ${changed.join(' and rank ')} showed to settle a dispute reached rank ${comm.rank} changed (they do not hash to what their author signed): a rank that passed them on changed them. Nobody is named from them; the update was not applied`,
      { step: v.step, evidenceChanged: changed },
    );
  return judgeEvidence(input, disputes, blocks, seed);
}

function sameWords(a: Int32Array, b: Int32Array): boolean {
  return a.length === b.length && a.every((w, i) => w === b[i]);
}

function verdictOf(words: Int32Array, n: number, k: number): Verdict {
  const h = HASH_WORDS * n;
  return {
    sumHash: words.subarray(0, h),
    own: new Float32Array(words.buffer, words.byteOffset + 4 * h, 2 * k * n),
    digest: digestFromWords(words.subarray(h + 2 * k * n), n, k),
  };
}

function sameHash(verdicts: Verdict[], a: number, b: number, chunk: number): boolean {
  const x = verdicts[a].sumHash;
  const y = verdicts[b].sumHash;
  for (let j = HASH_WORDS * chunk; j < HASH_WORDS * (chunk + 1); j++) if (x[j] !== y[j]) return false;
  return true;
}

/**
 * A chunk whose sum, which every rank holds alike, is not the published contributions' while every hop
 * into its owner agreed and added up: the owner's own last step (what it received plus its contribution)
 * is what its signed digest and sketch do not explain. A sum that is not finite may be an overflow of
 * finite contributions: left to the caller's divergence rule.
 */
function lastStepFaults(
  wrong: number[],
  reduced: Float32Array,
  chunks: RingChunk[],
  found: HopFindings,
): ProvenFault[] {
  const disputed = new Set(found.disputes.map((h) => h.chunk));
  const explained = new Set(found.proven.map((f) => f.chunk));
  return wrong.flatMap((i) => {
    const c = chunks[i];
    if (c.owner < 0 || disputed.has(i) || explained.has(i)) return [];
    if (!reduced.subarray(c.offset, c.offset + c.count).every(Number.isFinite)) return [];
    const reason = `the sum of chunk ${i}, which every rank holds alike, is not what its signed digest says it received plus its published contribution: it sent other numbers than it published`;
    return [{ rank: c.owner, chunk: i, reason }];
  });
}

function gatherOptions(v: VerifiedStep, name: string) {
  return { name, step: v.step, timeoutMs: v.timeoutMs, misbehaviour: v.misbehaviour };
}

/** Names every rank the signed digests convict (the same on every rank) and fails the step. */
function nameProven(v: VerifiedStep, proven: ProvenFault[]): never {
  const { comm } = v;
  const culprits = [...new Set(proven.map((f) => f.rank))].sort((a, b) => a - b);
  for (const peer of culprits) {
    const why = proven.find((f) => f.rank === peer)!.reason;
    const reason = `step ${v.step}: ${why} (verified allreduce, signed link digests)`;
    v.misbehaviour?.peerMisbehaved({ rank: comm.rank, peer, reason });
    if (comm.events.active) comm.events.emit({ type: 'peer-misbehaved', t: now(), rank: comm.rank, peer, reason });
  }
  const first = proven.find((f) => f.rank === culprits[0])!;
  throw new RingtrainError(
    ErrorCode.PeerMisbehaved,
    `step ${v.step} failed verification: rank ${culprits.join(' and rank ')} ${culprits.length > 1 ? 'are' : 'is'} named by ${culprits.length > 1 ? 'their' : 'its'} own signed link digest (${first.reason}); the update was not applied. Elastic jobs eject ${culprits.length > 1 ? 'them' : 'it'} and go on; otherwise resume from the recovery checkpoint without ${culprits.length > 1 ? 'them' : 'it'}`,
    { peer: culprits[0], culprits, step: v.step, proven },
  );
}

/** No rank convicted by its signature: the wrong results and disputed hops locate one link, as before signed digests. */
function nameFromClaims(v: VerifiedStep, reduced: Float32Array, wrongAt: number[][], badAt: number[][]): never {
  const { comm, chunks, step } = v;
  const n = chunks.length;
  const describe = (at: number[][], what: string) =>
    at.flatMap((w, r) => (w.length ? [`rank ${r}: ${what} ${w.join(', ')}`] : []));
  const seenBy = [
    ...describe(wrongAt, 'result chunk(s)'),
    ...describe(badAt, 'received partial(s) of chunk(s) its sender signed otherwise'),
  ].join('; ');
  // Every rank judges the same gathered findings, so every rank names the same one.
  const culprit = culpritOf(wrongAt, badAt, chunks, comm.size);
  const links =
    culprit !== null ? [{ from: culprit, to: (culprit + 1) % comm.size }] : suspectLinks(wrongAt, chunks, comm.size);
  const where = links.map((l) => `${l.from} → ${l.to}`).join(', ');
  if (links.length === 1) {
    const { from, to } = links[0];
    const reason = `step ${step}: its link to rank ${to} changed gradient data in transit, or it sent other numbers than it published: what it passed on does not match its published sketch plus what it received (verified allreduce; seen by ${seenBy})`;
    v.misbehaviour?.peerMisbehaved({ rank: comm.rank, peer: from, reason });
    if (comm.events.active)
      comm.events.emit({ type: 'peer-misbehaved', t: now(), rank: comm.rank, peer: from, reason });
    throw new RingtrainError(
      ErrorCode.PeerMisbehaved,
      `step ${step} failed verification: rank ${from} sent rank ${to} gradients that its published sketch does not explain (${seenBy}); the update was not applied. Elastic jobs eject rank ${from} (the sender) and go on; otherwise resume from the recovery checkpoint without it`,
      { peer: from, culprits: [from], link: [from, to], step, wrongAt, badAt },
    );
  }
  // Wrong everywhere and no one rank to blame: the sum itself broke (finite contributions that
  // overflowed, a run diverging under a peer whose large gradients are what it published). Said
  // as a divergence, which stops the job with the suspects named, not as a ring that broke for
  // no reason (an elastic job would wait for a membership change that never comes).
  if (wrongAt.every((w) => w.length === n) && reduced.some((x) => !Number.isFinite(x))) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the averaged gradient of 'gradients' holds non-finite values at step ${step}, wrong against the published sketches on every rank and no single rank explains it (${seenBy}): a rank diverged; lower the learning rate`,
      { tensor: 'gradients', step, diverged: true, wrongAt, badAt },
    );
  }
  throw new RingtrainError(
    ErrorCode.Aborted,
    `step ${step} failed verification: the summed gradients changed in transit (${seenBy}), on one of the links ${where}; the update was not applied and no single rank explains it`,
    { step, wrongAt, badAt, links: links.map((l) => [l.from, l.to]) },
  );
}
