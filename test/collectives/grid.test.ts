/**
 * The gloo-style grid: ranks x element counts x ops x dtypes x algorithms
 * over the memory transport, each result checked against a float64
 * reference, with a tiny segment size so that every multi-segment path runs
 * even on small inputs. Every allreduce algorithm runs the whole grid, forced
 * (the automatic choice would pick one by size), but the hierarchical one, whose
 * grid is over group shapes too (hierarchical.test.ts); it runs the in-place one.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { REDUCE_OPS, type Algorithm, type ReduceOp, type Tensor } from '../../src/collectives/codecs/types.ts';
import { input, reference, tolerance, valuesOf, type Kind } from './reference.ts';

const KINDS: Kind[] = ['float32', 'int32', 'fp16', 'float16', 'int8'];
/**
 * Empty, one element, fewer elements than ranks, then two counts cut into many segments: 307 at 8-byte segments
 * (2 floats: 19 or more segments in each of 8 ranks' chunks) and 16411, a prime just over 8 ranks × 2 segments of
 * 4 KiB floats, so that even 8 ranks' chunks hold two whole segments and a part of one. The segment cutting
 * (codecs/partition.ts) has no limit beyond these; 1,000 and 65,537 (as before) ran the same paths for 80% of the
 * segmented algorithms' time. Large tensors have their own test below (1,000,003 elements).
 */
const COUNTS = [0, 1, 3, 100, 307, 16411];
/**
 * Recursive doubling moves whole tensors and has no segments: the large count adds time, not paths.
 * Halving-doubling and two-shot cut their blocks into segments, so they take the large count as the ring does.
 */
const COUNTS_BY_ALGORITHM = {
  ring: COUNTS,
  'recursive-doubling': COUNTS.slice(0, -1),
  'halving-doubling': COUNTS,
  'two-shot': COUNTS,
};

async function check(
  size: number,
  count: number,
  op: ReduceOp,
  kind: Kind,
  segmentBytes: number,
  algorithm: Algorithm,
  inPlace = false,
): Promise<void> {
  const comms = createMemoryRing(size);
  const inputs = comms.map((_, r) => input(kind, op, count, r));
  const opts = {
    name: 'grid',
    op,
    segmentBytes,
    algorithm,
    compression: kind === 'fp16' ? ('fp16' as const) : ('none' as const),
  };
  const results = await Promise.all(
    comms.map((c, r) =>
      inPlace ? allreduceInPlace(c, inputs[r].slice(), { ...opts, chunkBytes: 4096 }) : allreduce(c, inputs[r], opts),
    ),
  );
  comms.forEach((c) => c.close());
  const ref = reference(op, inputs);
  const where = `size=${size} count=${count} op=${op} kind=${kind} algorithm=${algorithm}${inPlace ? ' in place' : ''}`;
  for (const res of results) {
    expect(res.length, where).toBe(count);
    expect(res.constructor, where).toBe(inputs[0].constructor);
  }
  // Every rank ends with bitwise the same tensor (the optimizer depends on it).
  const bytes = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
  for (const res of results.slice(1)) expect(Buffer.compare(bytes(res), bytes(results[0])), where).toBe(0);
  const got = valuesOf(results[0]);
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < count; i++) {
    const over = Math.abs(got[i] - ref[i]) - tolerance(kind, op, inputs, i, ref[i]);
    if (over > worst || Number.isNaN(over)) {
      worst = over;
      worstAt = i;
    }
  }
  expect(worstAt, `${where}: element ${worstAt} is ${got[worstAt]}, reference ${ref[worstAt]}`).toBe(-1);
}

for (const algorithm of ['ring', 'recursive-doubling', 'halving-doubling', 'two-shot'] as const) {
  describe(`allreduce grid over memory links (${algorithm})`, () => {
    for (let size = 1; size <= 8; size++) {
      it(`${size} rank(s): every count, op and dtype`, async () => {
        for (const count of COUNTS_BY_ALGORITHM[algorithm]) {
          // Small counts: 8-byte segments (2 floats). Larger: keep message counts sane but still many segments per
          // chunk.
          const segmentBytes = count <= 307 ? 8 : 4096;
          for (const op of REDUCE_OPS)
            for (const kind of KINDS) await check(size, count, op, kind, segmentBytes, algorithm);
        }
      });
    }
  });
}

describe('allreduce grid, large and in place', () => {
  it('1000003 elements for 2, 3 and 8 ranks (sum, max, average)', async () => {
    for (const size of [2, 3, 8]) {
      for (const [op, kind] of [
        ['sum', 'float32'],
        ['max', 'int32'],
        ['average', 'fp16'],
      ] as const) {
        await check(size, 1_000_003, op, kind, 65536, 'ring');
      }
    }
  });

  it('in place on the buffer itself, cut into 4 KiB chunks, for every algorithm', async () => {
    for (const size of [1, 3, 4, 6]) {
      for (const algorithm of [
        'ring',
        'recursive-doubling',
        'halving-doubling',
        'two-shot',
        'hierarchical',
        'auto',
      ] as const) {
        for (const kind of ['float32', 'int8', 'float16'] as const)
          await check(size, 3001, 'sum', kind, 1024, algorithm, true);
      }
    }
  });
});
