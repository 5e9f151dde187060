/**
 * Top-k sparsification: each rank sends only the k = ceil(R·n) elements of
 * largest magnitude, as (index, value) pairs, and keeps the rest in its
 * error-feedback residual, to be added to the next call's values. A sum of
 * sparse vectors is no sparser than its densest part, so the ring's
 * reduce-scatter would fill in: instead every rank's pairs go round the ring
 * once (an allgather of N blocks of 8k bytes), and every rank adds them up in
 * rank order, so all get the same float32 result. Traffic per rank: (N-1)·8k
 * bytes, against about 8n·(N-1)/N for the float32 ring: 1/(R·N) times fewer.
 *
 * Selection ties are broken by index (lowest first), so a rank's choice is a
 * function of its values alone. A non-finite value counts as the largest, so
 * it is sent and shows up at the receivers (the optimizer's finiteness check)
 * instead of hiding in a residual.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { fromCounts } from '../codecs/partition.ts';
import { ringAllgather } from './ring.ts';
import type { Run } from '../controller/run.ts';
import { codecFor } from '../codecs/wire.ts';

// The ratio's text form lives in core: the signaling server checks a job's compression without collectives.
export { topkRatio, type TopkCompression } from '../../job/setting-text.ts';

/** Elements each rank sends of a tensor of n. */
export function topkCount(n: number, ratio: number): number {
  return n === 0 ? 0 : Math.min(n, Math.max(1, Math.ceil(ratio * n)));
}

const magnitude = (x: number): number => (Number.isFinite(x) ? Math.abs(x) : Infinity);

/** The value that would sit at position `nth` if `a` were sorted ascending (Hoare's selection; reorders `a`). */
function nthSmallest(a: Float32Array, nth: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >>> 1];
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        const t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (nth <= j) hi = j;
    else if (nth >= i) lo = i;
    else return a[nth];
  }
  return a[nth];
}

/** The k positions of largest magnitude, ascending; ties go to the lower index. */
export function topkIndices(values: Float32Array, k: number): Uint32Array {
  const n = values.length;
  if (k >= n) return Uint32Array.from({ length: n }, (_, i) => i);
  if (k === 0) return new Uint32Array(0);
  // The k-th largest magnitude by selection (linear on average); then everything above it, and ties at it by index.
  const mags = new Float32Array(n);
  for (let i = 0; i < n; i++) mags[i] = magnitude(values[i]);
  const threshold = nthSmallest(mags.slice(), n - k);
  let above = 0;
  for (let i = 0; i < n; i++) if (mags[i] > threshold) above++;
  let ties = k - above;
  const out = new Uint32Array(k);
  let j = 0;
  for (let i = 0; i < n; i++) {
    if (mags[i] > threshold || (mags[i] === threshold && ties-- > 0)) out[j++] = i;
  }
  return out;
}

/**
 * Picks what this rank sends from `values` (+ `residual`, when given: error
 * feedback), writes the pairs into `indices`/`picked` (k each), and leaves in
 * `residual` everything not sent.
 */
export function selectTopk(
  values: Float32Array,
  k: number,
  indices: Int32Array,
  picked: Float32Array,
  residual?: Float32Array,
): void {
  let acc = values;
  if (residual) {
    for (let i = 0; i < values.length; i++) residual[i] += values[i];
    acc = residual;
  }
  const chosen = topkIndices(acc, k);
  for (let j = 0; j < k; j++) {
    indices[j] = chosen[j];
    picked[j] = acc[chosen[j]];
  }
  if (residual) {
    for (let j = 0; j < k; j++) residual[chosen[j]] = 0;
    // A non-finite value must not poison every later step through the residual: it was sent.
    for (let i = 0; i < residual.length; i++) {
      if (!Number.isFinite(residual[i])) {
        residual.fill(0);
        break;
      }
    }
  }
}

/** The sum over ranks of each rank's sparse pairs, into `buf` (zeroed first), in rank order. */
export function sumSparse(buf: Float32Array, blocks: { indices: Int32Array; values: Float32Array }[]): void {
  buf.fill(0);
  for (const b of blocks) for (let j = 0; j < b.indices.length; j++) buf[b.indices[j]] += b.values[j];
}

/**
 * The data part of a top-k allreduce (sum of every rank's top-k of its own
 * `buf`, already prescaled), in place on `buf`; the caller finishes it
 * (postscale, average). Every rank's k is the same: negotiation made sure
 * every rank brings a tensor of the same length.
 */
export async function topkAllreduceInPlace(
  run: Run,
  buf: Float32Array,
  ratio: number,
  residual?: Float32Array,
): Promise<void> {
  const { rank, size } = run.comm;
  const k = topkCount(buf.length, ratio);
  if (k === 0) return;
  // One int32 block of 2k per rank: k indices, then k float32 values by their bits.
  const gathered = new Int32Array(size * 2 * k);
  const asFloat = new Float32Array(gathered.buffer);
  const block = (r: number) => ({
    indices: gathered.subarray(r * 2 * k, r * 2 * k + k),
    values: asFloat.subarray(r * 2 * k + k, (r + 1) * 2 * k),
  });
  const mine = block(rank);
  selectTopk(buf, k, mine.indices, mine.values, residual);
  await run.phase('allgather', () =>
    ringAllgather(run, gathered, fromCounts(new Array<number>(size).fill(2 * k)), codecFor('none', gathered)),
  );
  for (let r = 0; r < size; r++) {
    const b = block(r);
    for (const i of b.indices) {
      if (!(i >= 0 && i < buf.length))
        throw new RingtrainError(
          ErrorCode.PeerMisbehaved,
          `top-k allreduce: rank ${r} sent index ${i} for a tensor of ${buf.length}`,
          { peer: r, index: i },
        );
    }
  }
  sumSparse(
    buf,
    Array.from({ length: size }, (_, r) => block(r)),
  );
}
