/**
 * Signed link digests for the verified allreduce: who passed on what, provably.
 *
 * In the ring's reduce-scatter every rank but a chunk's owner sends that chunk's partial sum to
 * its right neighbour once. Per chunk, each rank digests what it sent (the SHA-256 of the bytes
 * and their sketch: sketch.ts, the verifier's seed) and what it received (the sketch alone). The
 * digests ride in the rank's verdict block, which its author signs (signed-gather.ts): one
 * signature per rank per step covers every link it sent on, and no message or round is added.
 * From every rank's signed digests each rank then judges alike:
 *
 *  - hop a → b agrees when a's sent sketch and b's received sketch are equal, bit for bit (the
 *    same bytes sketch the same way on every runtime);
 *  - a rank whose sent sketch is not its received sketch plus its published contribution (times
 *    the prescale, within float32 rounding) contradicts its own signature: it is named, proven;
 *  - different sketches: the receiver shows the bytes (an evidence gather, only then). Bytes that
 *    hash to a's signed hash settle it: whoever signed a sketch they do not have is named, proven.
 *    A receiver whose bytes do not have the sketch it signed itself cannot back its claim: named,
 *    proven. Bytes that have the receiver's sketch but not a's hash: the bytes changed between a
 *    and b, or one end lies about them. One rank's word against another's: the caller treats it
 *    as before (the link is named, its sender reported).
 *
 * Why the receiver signs a sketch and no hash of its own: under the seed the sum reveals the sketch
 * is a keyed hash nobody could aim at, so it tells a changed hop as well as a SHA-256 would, and a
 * receiver's claim is its word either way. What must be collision-hard is the sender's commitment,
 * against a receiver that picks the bytes it shows once every seed is known: that is the SHA-256.
 *
 * So a rank that claims its left neighbour sent it the poison it passes on is named itself: the
 * neighbour's signed digest says what it sent, and the bytes it must show contradict the claim.
 */
import { nodeBuiltin } from '../../core/runtime.ts';
import { sha256 as sha256Bytes, sha256Stream } from '../../core/sha256.ts';
import { sketchInto, sketchTogetherInto } from './sketch.ts';
import { publishChunk, type RingChunk } from './verified.ts';

/** 32-bit words of a SHA-256 digest. */
export const HASH_WORDS = 8;
/** float32's unit roundoff. */
const U = 2 ** -24;

/** What one rank signs about one step's reduce-scatter: per chunk, the hash and sketch of what it sent, the sketch of what it received. */
export interface LinkDigest {
  sentHash: Int32Array;
  sentSketch: Float32Array;
  receivedSketch: Float32Array;
}

/** Words a digest takes for `chunks` chunks of `k`-bucket sketches. */
export function digestWords(chunks: number, k: number): number {
  return HASH_WORDS * chunks + 2 * k * chunks;
}

/** Whether `rank` sends chunk `c` in reduce-scatter (every rank but its owner). */
export function sends(c: RingChunk, rank: number): boolean {
  return c.owner >= 0 && c.count > 0 && rank !== c.owner;
}

/** Whether `rank` receives chunk `c` in reduce-scatter (every rank but the one after its owner, which starts it). */
export function receives(c: RingChunk, rank: number, size: number): boolean {
  return c.owner >= 0 && c.count > 0 && size > 1 && rank !== (c.owner + 1) % size;
}

/** The SHA-256 of each chunk's bytes in `values` where `which` holds; zeros elsewhere. */
export async function chunkHashes(
  values: Float32Array,
  chunks: RingChunk[],
  which: (c: RingChunk) => boolean,
): Promise<Int32Array> {
  const out = new Int32Array(HASH_WORDS * chunks.length);
  await Promise.all(
    chunks.map(async (c, i) => {
      if (!which(c)) return;
      out.set(await sha256(values.subarray(c.offset, c.offset + c.count)), HASH_WORDS * i);
    }),
  );
  return out;
}

/** Whether node:crypto is here (Node, Deno): core/sha256.ts's sha256Stream then hashes with it. */
const NODE_CRYPTO = nodeBuiltin('node:crypto') !== undefined;

/**
 * The SHA-256 of `values`' bytes, as 8 words. node:crypto's where the runtime has it: it reads the
 * bytes where they lie, where WebCrypto must first copy them (half its cost on a gradient's sum);
 * else WebCrypto's, else TypeScript's (core/sha256.ts).
 */
export async function sha256(values: Float32Array): Promise<Int32Array> {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  let digest: Uint8Array;
  if (NODE_CRYPTO) {
    const stream = sha256Stream();
    stream.update(bytes);
    digest = stream.digest();
  } else {
    // WebCrypto takes no view of shared memory.
    digest = await sha256Bytes(values.buffer instanceof ArrayBuffer ? bytes : bytes.slice());
  }
  return new Int32Array(Uint8Array.from(digest).buffer);
}

/** What a rank sketches of one step under the revealed seed (stepSketches). */
export interface StepSketches {
  /** Its contribution's per-chunk sketches and masses, as published (verified.ts's chunkSketches). */
  own: Float32Array;
  /** The sum's per-chunk sketches (k per chunk), as verified.ts's wrongChunksOf takes them. */
  result: Float64Array;
  /** Its link digest's sketches (k per chunk; zeros where it did not send or receive the chunk). */
  sent: Float32Array;
  received: Float32Array;
}

/** The vectors of one step that a rank sketches, each where it lies in the gradient. */
export interface StepVectors {
  contribution: Float32Array;
  reduced: Float32Array;
  /** What it sent and received in reduce-scatter. */
  sent: Float32Array;
  received: Float32Array;
}

/**
 * Every sketch `rank` publishes of a step, in one pass per chunk (sketch.ts's sketchTogetherInto: the
 * bucket of an element is hashed once for its contribution, the sum, and what it sent and received).
 */
export function stepSketches(v: StepVectors, chunks: RingChunk[], k: number, seed: number, rank: number, size: number) {
  const n = chunks.length;
  const out: StepSketches = {
    own: new Float32Array(2 * k * n),
    result: new Float64Array(k * n),
    sent: new Float32Array(k * n),
    received: new Float32Array(k * n),
  };
  const own = new Float64Array(k);
  const mass = new Float64Array(k);
  const sent = new Float64Array(k);
  const received = new Float64Array(k);
  chunks.forEach((c, i) => {
    const result = out.result.subarray(k * i, k * (i + 1));
    const vectors = [
      v.contribution,
      v.reduced,
      sends(c, rank) ? v.sent : null,
      receives(c, rank, size) ? v.received : null,
    ];
    sent.fill(0);
    received.fill(0);
    sketchTogetherInto([own, result, sent, received], vectors, seed, c.offset, c.count, mass);
    publishChunk(out.own, i, own, mass);
    comparable(out.sent, sent, k * i);
    comparable(out.received, received, k * i);
  });
  return out;
}

/**
 * `sketch` written into `out` at `at` as float32, each NaN as one NaN: its bits after arithmetic differ
 * between CPUs (x86 keeps an operand's payload, ARM may not), and two ends compare sketches bit for bit.
 */
function comparable(out: Float32Array, sketch: Float64Array, at: number): Float32Array {
  out.set(sketch, at);
  for (let b = at; b < at + sketch.length; b++) if (out[b] !== out[b]) out[b] = NaN;
  return out;
}

/** The digest as words, to ride in a signed block. */
export function digestToWords(d: LinkDigest): Int32Array {
  const parts = [d.sentHash, asWords(d.sentSketch), asWords(d.receivedSketch)];
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A digest read back from its words (views, not copies). */
export function digestFromWords(words: Int32Array, chunks: number, k: number): LinkDigest {
  const h = HASH_WORDS * chunks;
  const s = k * chunks;
  const floats = (from: number) => new Float32Array(words.buffer, words.byteOffset + 4 * from, s);
  return { sentHash: words.subarray(0, h), sentSketch: floats(h), receivedSketch: floats(h + s) };
}

function asWords(a: Float32Array): Int32Array {
  return new Int32Array(a.buffer, a.byteOffset, a.length);
}

/** A rank named by its own signed digest (or by the bytes it had to show), with why. */
export interface ProvenFault {
  rank: number;
  chunk: number;
  reason: string;
}

/** One hop of one chunk: `from` sent it, `to` received it. */
export interface Hop {
  chunk: number;
  from: number;
  to: number;
}

export interface HopFindings {
  proven: ProvenFault[];
  /** The sender's and the receiver's sketches differ: settled by the receiver's bytes (judgeEvidence). */
  disputes: Hop[];
}

export interface HopInput {
  size: number;
  chunks: RingChunk[];
  k: number;
  prescale: number;
  /** Each rank's published per-chunk sketches and masses (verified.ts's chunkSketches), times its factor. */
  published: Float32Array[];
  digests: LinkDigest[];
}

/** Every rank's signed digests, judged alike on every rank. */
export function judgeHops(x: HopInput): HopFindings {
  const found: HopFindings = { proven: [], disputes: [] };
  x.chunks.forEach((c, i) => {
    for (let a = 0; a < x.size; a++) {
      if (!sends(c, a)) continue;
      const b = (a + 1) % x.size;
      const hop = { chunk: i, from: a, to: b };
      if (!sameWords(asWords(x.digests[a].sentSketch), asWords(x.digests[b].receivedSketch), x.k * i, x.k))
        found.disputes.push(hop);
      const unexplained = unexplainedBucket(x, c, i, a);
      if (unexplained !== null)
        found.proven.push({
          rank: a,
          chunk: i,
          reason: `its signed digest says it passed on chunk ${i} as something its received partial sum plus its published contribution does not explain (bucket ${unexplained}): it sent other numbers than it published`,
        });
    }
  });
  return found;
}

/** The first bucket where rank a's sent sketch of chunk i is not its received sketch plus prescale × its published one, or null. */
function unexplainedBucket(x: HopInput, c: RingChunk, i: number, a: number): number | null {
  const { k, prescale } = x;
  const d = x.digests[a];
  const got = receives(c, a, x.size);
  const own = x.published[a];
  for (let b = 0; b < k; b++) {
    const sent = d.sentSketch[k * i + b];
    const received = got ? d.receivedSketch[k * i + b] : 0;
    const mine = own[2 * k * i + b];
    // Garbage in (a non-finite partial): what comes out of it proves nothing about this rank.
    if (!Number.isFinite(received)) continue;
    // The partial's own rounding is bounded by the masses of every rank before it on the path.
    let mass = 0;
    for (let r = (c.owner + 1) % x.size; ; r = (r + 1) % x.size) {
      mass += x.published[r][2 * k * i + k + b];
      if (r === a) break;
    }
    // A non-finite partial from finite ones is an overflow only where the published masses allow one.
    if (!Number.isFinite(sent)) {
      if (Math.abs(prescale) * mass < 3.4e38) return b;
      continue;
    }
    const bound =
      2 * U * (Math.abs(prescale) * (x.size + 1) * mass + Math.abs(sent) + Math.abs(received)) +
      2 * U * Math.abs(prescale * mine) +
      1e-37;
    if (!(Math.abs(sent - received - prescale * mine) <= bound)) return b;
  }
  return null;
}

function sameWords(a: Int32Array, b: Int32Array, from: number, count: number): boolean {
  for (let j = from; j < from + count; j++) if (a[j] !== b[j]) return false;
  return true;
}

/** Where each disputed chunk's bytes sit in its receiver's evidence block, and how long every block is. */
export function evidenceLayout(disputes: Hop[], chunks: RingChunk[], size: number) {
  const used = new Array<number>(size).fill(0);
  const at = disputes.map((h) => {
    const offset = used[h.to];
    used[h.to] += chunks[h.chunk].count;
    return offset;
  });
  return { at, words: Math.max(0, ...used) };
}

/** The receiver's evidence block: its received bytes of each chunk it disputes, in evidenceLayout's places. */
export function evidenceOf(rank: number, disputes: Hop[], chunks: RingChunk[], size: number, received: Float32Array) {
  const { at, words } = evidenceLayout(disputes, chunks, size);
  const out = new Float32Array(words);
  disputes.forEach((h, j) => {
    if (h.to !== rank) return;
    const c = chunks[h.chunk];
    out.set(received.subarray(c.offset, c.offset + c.count), at[j]);
  });
  return out;
}

/** What the evidence settled: the ranks it convicts, and the hops it leaves one end's word against the other's. */
export interface EvidenceFindings {
  proven: ProvenFault[];
  /** The receiver's bytes have the sketch it signed but not the sender's hash: changed on the way, or one end lies. */
  unresolved: Hop[];
}

/**
 * Settles each dispute from its receiver's bytes (`evidence[r]`, every rank's evidence block): bytes
 * that hash to the sender's signed hash name whichever end signed a sketch they do not have; other
 * bytes name the receiver when they do not have its own signed sketch either, else stay unresolved.
 */
export async function judgeEvidence(
  x: HopInput,
  disputes: Hop[],
  evidence: Float32Array[],
  seed: number,
): Promise<EvidenceFindings> {
  const { at } = evidenceLayout(disputes, x.chunks, x.size);
  const found: EvidenceFindings = { proven: [], unresolved: [] };
  for (const [j, h] of disputes.entries()) {
    const c = x.chunks[h.chunk];
    const bytes = evidence[h.to].subarray(at[j], at[j] + c.count);
    const s = new Float64Array(x.k);
    // Sketched where the chunk lies: each element's index is hashed into the map.
    sketchInto(s, bytes, seed, c.offset);
    const truth = asWords(comparable(new Float32Array(x.k), s, 0));
    const sentRight = sameWords(truth, asWords(x.digests[h.from].sentSketch.subarray(x.k * h.chunk)), 0, x.k);
    const receivedRight = sameWords(truth, asWords(x.digests[h.to].receivedSketch.subarray(x.k * h.chunk)), 0, x.k);
    const sentBytes = sameWords(
      await sha256(bytes),
      x.digests[h.from].sentHash.subarray(HASH_WORDS * h.chunk),
      0,
      HASH_WORDS,
    );
    if (!sentBytes && receivedRight) {
      found.unresolved.push(h);
      continue;
    }
    if (!sentBytes) {
      found.proven.push({
        rank: h.to,
        chunk: h.chunk,
        reason: `it claimed rank ${h.from} sent it chunk ${h.chunk} with another sketch than rank ${h.from} signed, and the bytes it showed have neither that sketch nor the hash rank ${h.from} signed (a false accusation: it cannot back it)`,
      });
      continue;
    }
    if (!sentRight)
      found.proven.push({
        rank: h.from,
        chunk: h.chunk,
        reason: `it signed a sketch of chunk ${h.chunk} that the bytes it sent rank ${h.to} do not have (rank ${h.to} showed them)`,
      });
    if (!receivedRight)
      found.proven.push({
        rank: h.to,
        chunk: h.chunk,
        reason: `it claimed rank ${h.from} sent it chunk ${h.chunk} as something else than rank ${h.from} signed: the bytes rank ${h.from} signed the hash of say otherwise (a false accusation)`,
      });
  }
  return found;
}
