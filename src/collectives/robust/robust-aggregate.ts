/**
 * Coordinate-wise robust aggregation: every rank gets, for each element, the
 * mean, the trimmed mean or the median of the ranks' values (a sum cannot
 * ignore a wild rank; these can, as long as fewer than half are wild).
 *
 * A rule like these needs every rank's value of an element in one place, not
 * a running sum, so it is not a ring allreduce. Layout: an alltoall sends
 * chunk c of every rank's vector to rank c (chunks as the ring cuts them),
 * rank c applies the rule to its chunk's N columns, and an allgather hands
 * the results round. Each rank sends (N-1)/N of the vector in each phase:
 * 2(N-1)/N·n floats, as the ring allreduce; but the alltoall talks to every
 * peer at once rather than to one neighbour, and each rank sorts its chunk's
 * N values per element (n/N · N log N comparisons).
 *
 * Non-finite values sort above every finite one (NaN as +Infinity), so a
 * rank sending NaN or Infinity is trimmed away, or outvoted by the median;
 * the mean lets them through (the guard names such a rank before summing).
 *
 * 'centered-clip' (centered-clip.ts) uses the same layout, with a few tiny
 * allgathers of N floats in between: it clips whole deviations from a
 * reference (the previous step's aggregate, which the caller keeps).
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/interface.ts';
import { allgather } from '../allgather.ts';
import { alltoall } from '../alltoall.ts';
import { splitEven } from '../codecs/partition.ts';
import { centeredClipChunk } from './centered-clip.ts';

// The rule's text form lives in core: the signaling server checks a job's rule without collectives.
export { AGGREGATION_FORMS, parseAggregation, type Aggregation, type AggregationRule } from '../../job/setting-text.ts';
import type { Aggregation } from '../../job/setting-text.ts';

/** Ranks dropped at each end per element for `trim` of `n` ranks (trim < 0.5 always leaves one). */
export function trimmedCount(trim: number, n: number): number {
  return Math.floor(trim * n + 1e-9);
}

/** NaN sorts as +Infinity (last), and keeps its value. */
const key = (v: number) => (Number.isNaN(v) ? Infinity : v);

/**
 * Insertion sort of col[0..n): ranks are few (N values per element), and an
 * inline sort of a typed array is several times faster than Array#sort with a
 * comparator, which is called once per comparison for each of n/N elements.
 */
function sortColumn(col: Float64Array, n: number): void {
  for (let i = 1; i < n; i++) {
    const v = col[i];
    const k = key(v);
    let j = i - 1;
    while (j >= 0 && key(col[j]) > k) {
      col[j + 1] = col[j];
      j--;
    }
    col[j + 1] = v;
  }
}

/**
 * The rule over columns: `rows` holds n vectors of m values one after the
 * other; out[i] is the rule applied to rows[0·m+i], …, rows[(n-1)·m+i].
 */
export function aggregateColumns(rows: Float32Array, n: number, m: number, a: Aggregation, out: Float32Array): void {
  if (a.rule === 'centered-clip')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'centered-clip clips whole vectors, not columns: use robustAllreduce',
    );
  const col = new Float64Array(n);
  const k = a.rule === 'trimmed-mean' ? trimmedCount(a.trim, n) : 0;
  for (let i = 0; i < m; i++) {
    if (a.rule === 'mean') {
      let s = 0;
      for (let r = 0; r < n; r++) s += rows[r * m + i];
      out[i] = s / n;
      continue;
    }
    for (let r = 0; r < n; r++) col[r] = rows[r * m + i];
    sortColumn(col, n);
    if (a.rule === 'median') {
      const mid = n >> 1;
      out[i] = n % 2 ? col[mid] : (col[mid - 1] + col[mid]) / 2;
    } else {
      let s = 0;
      for (let r = k; r < n - k; r++) s += col[r];
      out[i] = s / (n - 2 * k);
    }
  }
}

/**
 * Every rank's `data` aggregated by `a` (the same on every rank, as a new
 * array). `name` must be the same on every rank. centered-clip starts from
 * `reference` (the previous step's result, the same on every rank; absent: zeros).
 */
export async function robustAllreduce(
  comm: Communicator,
  data: Float32Array,
  a: Aggregation,
  opts: { name?: string; timeoutMs?: number; reference?: Float32Array } = {},
): Promise<Float32Array> {
  if (!(data instanceof Float32Array))
    throw new RingtrainError(ErrorCode.InvalidArgument, 'robustAllreduce: the tensor must be a Float32Array');
  const n = comm.size;
  const name = opts.name ?? 'robust-allreduce';
  const chunks = splitEven(data.length, n);
  const mine = chunks[comm.rank];
  // Rank c receives chunk c from every rank, in rank order: n rows of mine.count values.
  const { data: rows } = await alltoall(comm, data, {
    name: `${name}/scatter`,
    timeoutMs: opts.timeoutMs,
    splits: chunks.map((c) => c.count),
  });
  const reduced = new Float32Array(mine.count);
  if (a.rule === 'centered-clip') {
    if (opts.reference && opts.reference.length !== data.length)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `centered-clip: the reference holds ${opts.reference.length} values for a tensor of ${data.length}`,
      );
    if (opts.reference) reduced.set(opts.reference.subarray(mine.offset, mine.offset + mine.count));
    await centeredClipChunk(comm, rows, n, mine.count, reduced, a.tau, { name, timeoutMs: opts.timeoutMs });
  } else aggregateColumns(rows, n, mine.count, a, reduced);
  return allgather(comm, reduced, { name: `${name}/gather`, timeoutMs: opts.timeoutMs });
}
