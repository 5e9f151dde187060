/**
 * The arithmetic of a verified allreduce: before the sum, every rank publishes
 * a sketch of each ring chunk of its contribution (sketch.ts; the sketch is
 * linear, so the sketch of the sum must equal the sum of the sketches); after
 * it, every rank sketches each chunk of what it received and compares, within
 * a bound on float32 rounding. Which ranks saw which chunk wrong then says
 * which link changed it:
 *
 *  - In the ring, chunk c is summed along c+1 → c+2 → … → c (reduce-scatter;
 *    its owner c ends with the sum), then passed on c → c+1 → … → c-1
 *    (allgather), forwarded byte for byte.
 *  - Corrupted during the allgather on link a → a+1: the owner and the ranks
 *    before a+1 see it right, a+1 and every rank after it wrong. The first
 *    wrong rank names the link.
 *  - Corrupted during reduce-scatter: every rank, the owner too, sees it
 *    wrong; the link is one of the chunk's reduce-scatter path (every link but
 *    c → c+1).
 *  - Assuming one faulty link, it is in every wrong chunk's set: the
 *    intersection. A link that corrupts all it carries corrupts every chunk
 *    but its sender's in reduce-scatter and its sender's in allgather, which
 *    leaves exactly that link.
 *
 * Lossless float32 allreduces only (the bound is for rounding, not for fp16 or
 * int8 codecs). Knows nothing of gradients: arrays and ranks.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { splitEven } from '../codecs/partition.ts';
import { checkBuckets, sketchInto } from './sketch.ts';
import { DEFAULT_FUSION_THRESHOLD_BYTES } from '../fusion.ts';
import { autoAlgorithm } from '../allreduce.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../codecs/types.ts';

/** A chunk of the flat buffer as the ring reduces it; owner -1: reduced by recursive doubling or halving-doubling (no ring path). */
export interface RingChunk {
  offset: number;
  count: number;
  owner: number;
}

/** One link of the ring: `from` sends to `to` = from + 1 (mod size). */
export interface RingLink {
  from: number;
  to: number;
}

/** float32's unit roundoff. */
const U = 2 ** -24;

/**
 * The chunks allreduceInPlace cuts `length` float32 elements into on `size`
 * ranks: pieces of at most chunkBytes (each its own collective), each cut
 * into one chunk per rank when it goes round the ring ('auto' with these
 * thresholds; both 0: every piece goes round the ring, as an observed one does).
 */
export function ringChunks(
  length: number,
  size: number,
  chunkBytes = DEFAULT_FUSION_THRESHOLD_BYTES,
  smallBytes = DEFAULT_SMALL_BYTES,
  mediumBytes = DEFAULT_MEDIUM_BYTES,
): RingChunk[] {
  const per = Math.max(1, Math.floor(chunkBytes / 4));
  const out: RingChunk[] = [];
  for (let start = 0; start < length || (length === 0 && start === 0); start += per) {
    const count = Math.min(per, length - start);
    if (size === 1 || autoAlgorithm(count * 4, size, smallBytes, mediumBytes) !== 'ring') {
      out.push({ offset: start, count, owner: size === 1 ? 0 : -1 });
    } else {
      splitEven(count, size).forEach((r, owner) => out.push({ offset: start + r.offset, count: r.count, owner }));
    }
    if (length === 0) break;
  }
  return out;
}

/**
 * What a rank publishes for verification: per chunk, the sketch (k buckets)
 * then each bucket's sum of absolute values, as one float32 array of
 * 2·k·chunks numbers.
 */
export function chunkSketches(values: Float32Array, chunks: RingChunk[], k: number, seed: number): Float32Array {
  checkBuckets(k);
  const out = new Float32Array(2 * k * chunks.length);
  const s = new Float64Array(k);
  const m = new Float64Array(k);
  chunks.forEach((c, i) => {
    s.fill(0);
    m.fill(0);
    sketchInto(s, values.subarray(c.offset, c.offset + c.count), seed, c.offset, m);
    publishChunk(out, i, s, m);
  });
  return out;
}

/** Chunk i's sketch and masses in chunkSketches' layout (`out`: 2·k per chunk). */
export function publishChunk(out: Float32Array, i: number, sketch: Float64Array, mass: Float64Array): void {
  const k = sketch.length;
  out.set(sketch, 2 * k * i);
  // Rounded up, so that the bound built from it stays a bound.
  for (let b = 0; b < k; b++) out[2 * k * i + k + b] = mass[b] * (1 + 2 * U);
}

/**
 * The chunks of `result` that do not match scale × Σ(ranks' contributions),
 * judged from every rank's published `chunkSketches` (`published[r]`).
 * `result` is what this rank holds after the allreduce. A chunk is wrong when
 * a bucket differs by more than the rounding of N float32 additions and two
 * scalings could explain (doubled, for safety), or is not finite.
 */
export function wrongChunks(
  result: Float32Array,
  chunks: RingChunk[],
  published: Float32Array[],
  k: number,
  seed: number,
  scale: number,
): number[] {
  const seen = new Float64Array(k * chunks.length);
  chunks.forEach((c, i) =>
    sketchInto(seen.subarray(k * i, k * (i + 1)), result.subarray(c.offset, c.offset + c.count), seed, c.offset),
  );
  return wrongChunksOf(seen, chunks, published, k, scale);
}

/** wrongChunks from the result's per-chunk sketches, already taken (`seen`: k per chunk, under the published seed). */
export function wrongChunksOf(
  seen: Float64Array,
  chunks: RingChunk[],
  published: Float32Array[],
  k: number,
  scale: number,
): number[] {
  const n = published.length;
  for (const [r, p] of published.entries()) {
    if (p.length !== 2 * k * chunks.length) {
      throw new RingtrainError(
        ErrorCode.Mismatch,
        `verified allreduce: rank ${r} published ${p.length} sketch numbers where ${2 * k * chunks.length} were expected; the ranks disagree on the layout or the verification settings`,
        { rank: r },
      );
    }
  }
  const wrong: number[] = [];
  chunks.forEach((c, i) => {
    for (let b = 0; b < k; b++) {
      let expected = 0;
      let mass = 0;
      let size = 0;
      for (const p of published) {
        expected += p[2 * k * i + b];
        size += Math.abs(p[2 * k * i + b]);
        mass += p[2 * k * i + k + b];
      }
      const bound = 2 * U * Math.abs(scale) * ((n + 1) * mass + size) + 1e-37;
      const diff = Math.abs(seen[k * i + b] - scale * expected);
      if (!(diff <= bound)) {
        wrong.push(i);
        return;
      }
    }
  });
  return wrong;
}

/**
 * The links that can explain what every rank saw (`wrongAt[r]`: the chunks
 * rank r found wrong), assuming one faulty link; when no single link can,
 * every link that explains some of it. Empty when nothing was wrong.
 */
export function suspectLinks(wrongAt: number[][], chunks: RingChunk[], size: number): RingLink[] {
  const all = Array.from({ length: size }, (_, a) => a);
  const sets: number[][] = []; // per wrong chunk: the `from` of each link that could have done it
  chunks.forEach((c, i) => {
    const wrong = all.map((r) => wrongAt[r]?.includes(i) ?? false);
    if (!wrong.some(Boolean)) return;
    if (c.owner < 0) return void sets.push(all); // recursive doubling: no path to follow
    if (wrong[c.owner]) return void sets.push(all.filter((a) => a !== c.owner)); // reduce-scatter path
    // Allgather order from the owner: the first rank that saw it wrong names the link into it.
    for (let p = 1; p < size; p++) {
      const r = (c.owner + p) % size;
      if (wrong[r]) return void sets.push([(r - 1 + size) % size]);
    }
  });
  if (sets.length === 0) return [];
  let common = sets[0];
  for (const s of sets.slice(1)) common = common.filter((a) => s.includes(a));
  const from = common.length > 0 ? common : [...new Set(sets.flat())].sort((a, b) => a - b);
  return from.map((a) => ({ from: a, to: (a + 1) % size }));
}

/**
 * The chunks whose reduce-scatter partial sum, as `rank` received it from its left
 * neighbour, does not match the published sketches of the ranks before it on the
 * chunk's path (owner+1 … rank-1), times `prescale`. `received` maps a segment's
 * offset to the sketch (k buckets) of what arrived there. Rank owner+1 starts the
 * chunk and receives none of it; chunks reduced by recursive doubling have no path.
 */
export function badReceipts(
  rank: number,
  size: number,
  chunks: RingChunk[],
  received: Map<number, Float64Array>,
  published: Float32Array[],
  k: number,
  prescale: number,
): number[] {
  const bad: number[] = [];
  // Nothing observed: the caller did not watch its reduce-scatter (there is nothing to judge).
  if (received.size === 0) return bad;
  const offsets = [...received.keys()];
  chunks.forEach((c, i) => {
    if (c.owner < 0 || c.count === 0 || size < 2 || rank === (c.owner + 1) % size) return;
    const seen = new Float64Array(k);
    let parts = 0;
    for (const off of offsets) {
      if (off < c.offset || off >= c.offset + c.count) continue;
      const s = received.get(off)!;
      for (let b = 0; b < k; b++) seen[b] += s[b];
      parts++;
    }
    if (parts === 0) return void bad.push(i);
    const path: number[] = [];
    for (let r = (c.owner + 1) % size; r !== rank; r = (r + 1) % size) path.push(r);
    for (let b = 0; b < k; b++) {
      let expected = 0;
      let mass = 0;
      let magnitude = 0;
      for (const r of path) {
        expected += published[r][2 * k * i + b];
        magnitude += Math.abs(published[r][2 * k * i + b]);
        mass += published[r][2 * k * i + k + b];
      }
      const bound = 2 * U * Math.abs(prescale) * ((path.length + 1) * mass + magnitude) + 1e-37;
      if (!(Math.abs(seen[b] - prescale * expected) <= bound)) return void bad.push(i);
    }
  });
  return bad;
}

/**
 * Who sent data that its published sketch (plus what it received) does not explain,
 * from every rank's findings: `wrongAt[r]`, the chunks rank r found wrong after the
 * allreduce, and `badAt[r]`, the chunks whose reduce-scatter partial rank r received
 * wrong. Along each chunk's path the first rank that received it wrong names its left
 * neighbour (every rank before it passed on what it was given plus its own published
 * part); a chunk received right all the way but finished wrong names its owner when the
 * owner finds it wrong itself, else the rank before the first that received it wrong in
 * the allgather. The sender of the first bad hop is named, not the receiver: which end of
 * a link lied cannot be told apart. Returns the one rank every wrong chunk names, or null
 * when they name several (or nothing was wrong).
 */
export function culpritOf(wrongAt: number[][], badAt: number[][], chunks: RingChunk[], size: number): number | null {
  const named = new Set<number>();
  chunks.forEach((c, i) => {
    const wrong = (r: number) => wrongAt[r]?.includes(i) ?? false;
    const bad = (r: number) => badAt[r]?.includes(i) ?? false;
    const any = Array.from({ length: size }, (_, r) => wrong(r) || bad(r)).some(Boolean);
    if (!any) return;
    if (c.owner < 0) return void named.add(-1);
    // Reduce-scatter receivers in path order: owner+2, …, owner.
    for (let p = 2; p <= size; p++) {
      const r = (c.owner + p) % size;
      if (bad(r)) return void named.add((r - 1 + size) % size);
    }
    if (wrong(c.owner)) return void named.add(c.owner);
    for (let p = 1; p < size; p++) {
      const r = (c.owner + p) % size;
      if (wrong(r)) return void named.add((r - 1 + size) % size);
    }
  });
  return named.size === 1 && !named.has(-1) ? [...named][0] : null;
}
