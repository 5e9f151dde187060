/**
 * Gradient sketches: a k-number summary of a long float vector, the same
 * linear map on every rank for a given seed, so that sketches can be
 * compared across ranks and the sketch of a sum is the sum of the sketches.
 *
 * The map is a signed count sketch: element i goes, with sign ±1, into one of
 * k buckets, both drawn from a hash of (seed, i). Compared with dense random
 * projections it costs one hash and one add per element whatever k is (a
 * dense ±1 projection costs k adds per element), and inner products are kept
 * just as well on average: <S(x), S(y)> estimates <x, y> without bias, with a
 * spread of about |x||y|/sqrt(k). So cosines between sketches estimate the
 * cosines between the vectors to about ±1/sqrt(k).
 *
 * Because an element lands in one bucket only, a change of one element shows
 * in its bucket alone, at full size: this is what the verified allreduce
 * (src/distributed/verify.ts) compares against a float-error bound.
 *
 * Knows nothing of gradients or links: arrays in, arrays out.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { median } from '../../core/stats.ts';

/** One 32-bit avalanche step (murmur3's finaliser). */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** The sketch seed of a step: every rank derives the same one from the job's seed and the step. */
export function stepSeed(jobSeed: number, step: number): number {
  return mix32(mix32((jobSeed >>> 0) ^ 0x5eed5eed) ^ mix32(step + 0x9e3779b9));
}

/**
 * A seed nobody can know before the step's sum exists: drawn from `step` and the words of the sum's
 * hashes (the verified allreduce's, per chunk). Every contribution has been sent by then, so no rank
 * can shape its own to hide in the null space of a sketch it cannot yet know.
 */
export function revealedSeed(step: number, sumHashes: Int32Array): number {
  let h = mix32(step + 0x7f4a7c15);
  for (const w of sumHashes) h = mix32(h ^ w);
  return h;
}

/** Checks a bucket count: a power of two (a mask replaces a division in the hot loop). */
export function checkBuckets(k: number): void {
  if (!Number.isInteger(k) || k < 1 || (k & (k - 1)) !== 0 || k > 1 << 20) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `a sketch needs a power-of-two number of buckets between 1 and 2^20, got ${k}`,
    );
  }
}

/**
 * Adds the sketch of `values` (which sit at `offset` in the whole vector) into
 * `out` (k buckets), and each bucket's sum of absolute values into `mass` when
 * given (the verified allreduce's error bound needs it). Sketching a vector
 * piece by piece gives the same result as sketching it whole.
 */
export function sketchInto(
  out: Float64Array,
  values: ArrayLike<number>,
  seed: number,
  offset = 0,
  mass?: Float64Array,
): void {
  const mask = out.length - 1;
  const s = seed >>> 0;
  const salt = Math.imul(s, 0x27d4eb2f);
  for (let j = 0; j < values.length; j++) {
    const v = values[j];
    const h = mix32((offset + j) ^ s) ^ salt;
    // Times ±1, not a branch on the sign: the sign is a coin flip per element, which a branch
    // mispredicts half the time (that was two thirds of a sketch's cost). The product is exact.
    out[(h >>> 1) & mask] += (1 - 2 * (h & 1)) * v;
    if (mass) mass[(h >>> 1) & mask] += Math.abs(v);
  }
}

/**
 * The sketches of up to four vectors that lie at the same place, in one pass: elements
 * `from`..`from + count` of each, written to `out[v]` (k buckets per vector), and the first
 * vector's bucket masses to `mass`. An element's bucket and sign are hashed once for all of
 * them (the hash is most of a sketch's cost); each sketch is sketchInto's into zeros, bit for bit
 * (same terms, same order). A null vector is skipped (its `out` left as it is).
 */
export function sketchTogetherInto(
  out: Float64Array[],
  vectors: (Float32Array | null)[],
  seed: number,
  from: number,
  count: number,
  mass: Float64Array,
): void {
  const k = mass.length;
  const mask = k - 1;
  const s = seed >>> 0;
  const salt = Math.imul(s, 0x27d4eb2f);
  // Four fixed inputs keep the loop free of per-element branches: an absent one reads the first
  // again into buckets nobody copies out.
  const [a, b, c, d] = [0, 1, 2, 3].map((v) => vectors[v] ?? vectors[0]!);
  const acc = new Float64Array(5 * k); // per bucket: a, |a|, b, c, d
  for (let i = from; i < from + count; i++) {
    const h = mix32(i ^ s) ^ salt;
    const at = 5 * ((h >>> 1) & mask);
    const sign = 1 - 2 * (h & 1);
    const x = a[i];
    acc[at] += sign * x;
    acc[at + 1] += Math.abs(x);
    acc[at + 2] += sign * b[i];
    acc[at + 3] += sign * c[i];
    acc[at + 4] += sign * d[i];
  }
  const slots = [0, 2, 3, 4];
  for (let bucket = 0; bucket < k; bucket++) {
    mass[bucket] = acc[5 * bucket + 1];
    for (let v = 0; v < 4; v++) if (vectors[v]) out[v][bucket] = acc[5 * bucket + slots[v]];
  }
}

/** The sketch of a whole vector in `k` buckets. */
export function sketch(values: ArrayLike<number>, k: number, seed: number): Float64Array {
  checkBuckets(k);
  const out = new Float64Array(k);
  sketchInto(out, values, seed);
  return out;
}

export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Cosine of two vectors; 0 when either is all zeros (no direction to compare). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const na = Math.sqrt(dot(a, a));
  const nb = Math.sqrt(dot(b, b));
  return na > 0 && nb > 0 ? dot(a, b) / (na * nb) : 0;
}

/** Coordinate-wise median of equally long vectors (robust to fewer than half of them being wild). */
export function coordinateMedian(rows: ArrayLike<number>[]): Float64Array {
  const k = rows[0]?.length ?? 0;
  const out = new Float64Array(k);
  const col: number[] = new Array(rows.length);
  for (let i = 0; i < k; i++) {
    for (let r = 0; r < rows.length; r++) col[r] = rows[r][i];
    out[i] = median(col);
  }
  return out;
}
