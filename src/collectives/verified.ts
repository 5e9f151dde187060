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
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { splitEven } from './partition.ts';
import { checkBuckets, sketchInto } from './sketch.ts';
import { DEFAULT_FUSION_THRESHOLD_BYTES } from './fusion.ts';
import { DEFAULT_SMALL_BYTES } from './types.ts';

/** A chunk of the flat buffer as the ring reduces it; owner -1: reduced by recursive doubling (no ring path). */
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
 * into one chunk per rank when it goes round the ring.
 */
export function ringChunks(length: number, size: number, chunkBytes = DEFAULT_FUSION_THRESHOLD_BYTES, smallBytes = DEFAULT_SMALL_BYTES): RingChunk[] {
  const per = Math.max(1, Math.floor(chunkBytes / 4));
  const out: RingChunk[] = [];
  for (let start = 0; start < length || (length === 0 && start === 0); start += per) {
    const count = Math.min(per, length - start);
    if (size === 1 || count * 4 <= smallBytes) {
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
    out.set(s, 2 * k * i);
    // Rounded up, so that the bound built from it stays a bound.
    for (let b = 0; b < k; b++) out[2 * k * i + k + b] = m[b] * (1 + 2 * U);
  });
  return out;
}

/**
 * The chunks of `result` that do not match scale × Σ(ranks' contributions),
 * judged from every rank's published `chunkSketches` (`published[r]`).
 * `result` is what this rank holds after the allreduce. A chunk is wrong when
 * a bucket differs by more than the rounding of N float32 additions and two
 * scalings could explain (doubled, for safety), or is not finite.
 */
export function wrongChunks(result: Float32Array, chunks: RingChunk[], published: Float32Array[], k: number, seed: number, scale: number): number[] {
  const n = published.length;
  for (const [r, p] of published.entries()) {
    if (p.length !== 2 * k * chunks.length) {
      throw new RingtrainError(ErrorCode.Mismatch, `verified allreduce: rank ${r} published ${p.length} sketch numbers where ${2 * k * chunks.length} were expected; the ranks disagree on the layout or the verification settings`, { rank: r });
    }
  }
  const wrong: number[] = [];
  const seen = new Float64Array(k);
  chunks.forEach((c, i) => {
    seen.fill(0);
    sketchInto(seen, result.subarray(c.offset, c.offset + c.count), seed, c.offset);
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
      const diff = Math.abs(seen[b] - scale * expected);
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
