/**
 * The verified allreduce's arithmetic (src/collectives/robust/verified.ts) on real
 * ring allreduces over memory links: honest sums always pass the float bound
 * (sizes × lengths grid, hostile magnitudes), a change beyond rounding is
 * caught, and which ranks saw which chunk wrong names the link. The same on
 * real WebRTC workers: test/robust/verify-faults.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allgather } from '../../src/collectives/allgather.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { stepSeed } from '../../src/collectives/robust/sketch.ts';
import { chunkSketches, ringChunks, suspectLinks, wrongChunks } from '../../src/collectives/robust/verified.ts';
import { mulberry32 } from '../../src/core/random.ts';
import { flipBitsOnSend } from '../support/chaos/faults.ts';

const K = 64;

/** Contributions with magnitudes from 1e-8 to 1e8 and sums that cancel: the worst for rounding. */
function hostile(n: number, rank: number): Float32Array {
  const r = mulberry32(1000 + rank);
  return Float32Array.from({ length: n }, (_, i) => {
    const big = 10 ** Math.floor(r() * 17 - 8);
    // Ranks 0 and 1 nearly cancel at every third element.
    if (i % 3 === 0 && rank < 2) return (rank === 0 ? 1 : -1) * big * (1 + (i % 7) * 1e-7);
    return (r() - 0.5) * big;
  });
}

/** Every rank: publish sketches, allreduce (average), check; returns each rank's wrong chunks. */
async function verifiedRound(
  comms: Communicator[],
  n: number,
  seed: number,
  corrupt?: (comms: Communicator[]) => void,
  observed = false,
): Promise<{ wrongAt: number[][]; chunks: ReturnType<typeof ringChunks> }> {
  const size = comms.length;
  // The allreduce below is forced round the ring: its layout at every size.
  const chunks = ringChunks(n, size, undefined, 0, 0);
  const data = comms.map((_, r) => hostile(n, r));
  const published = await Promise.all(
    comms.map((c, r) => allgather(c, chunkSketches(data[r], chunks, K, seed), { name: 'sketches' })),
  );
  corrupt?.(comms);
  await Promise.all(
    comms.map((c, r) =>
      allreduceInPlace(c, data[r], {
        op: 'average',
        name: 'grads',
        algorithm: 'ring',
        segmentBytes: 4096 + 16,
        // As the step checks reduce (step-checks.ts): observed, so checked after the sum.
        ...(observed ? { observeReceived: () => {} } : {}),
      }),
    ),
  );
  const block = 2 * K * chunks.length;
  const wrongAt = comms.map((_, r) =>
    wrongChunks(
      data[r],
      chunks,
      Array.from({ length: size }, (_, q) => published[r].subarray(q * block, (q + 1) * block)),
      K,
      seed,
      1 / size,
    ),
  );
  return { wrongAt, chunks };
}

describe('ringChunks', () => {
  it('cuts a buffer as allreduceInPlace does: pieces of the fusion threshold, one chunk per rank each, small pieces unrouted', () => {
    // 64-byte pieces hold 16 floats: 10 floats are one piece, cut 4/3/3 (both thresholds 0: the ring); 40 floats on 2
    // ranks are pieces of 16, 16 and 8.
    expect(ringChunks(10, 3, 64, 0, 0)).toEqual([
      { offset: 0, count: 4, owner: 0 },
      { offset: 4, count: 3, owner: 1 },
      { offset: 7, count: 3, owner: 2 },
    ]);
    expect(ringChunks(40, 2, 64, 0).map((c) => [c.offset, c.count, c.owner])).toEqual([
      [0, 8, 0],
      [8, 8, 1],
      [16, 8, 0],
      [24, 8, 1],
      [32, 4, 0],
      [36, 4, 1],
    ]);
    // Recursive doubling below smallBytes: one chunk, no path; one rank: its own.
    expect(ringChunks(100, 4)).toEqual([{ offset: 0, count: 100, owner: -1 }]);
    expect(ringChunks(100, 1)).toEqual([{ offset: 0, count: 100, owner: 0 }]);
    expect(ringChunks(0, 3)).toEqual([{ offset: 0, count: 0, owner: -1 }]);
    // Halving-doubling (middle sizes on 4, 8, ... ranks) and two-shot (on 3, 5, 6, 7) follow no ring path either;
    // on 2 ranks and on 9 'auto' takes the ring there.
    expect(ringChunks(100_000, 4)).toEqual([{ offset: 0, count: 100_000, owner: -1 }]);
    expect(ringChunks(100_000, 3)).toEqual([{ offset: 0, count: 100_000, owner: -1 }]);
    expect(ringChunks(100_000, 2).map((c) => c.owner)).toEqual([0, 1]);
    expect(ringChunks(100_000, 9).map((c) => c.owner)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    // Both thresholds 0 (an observed allreduce, step-checks.ts): the ring at every size.
    expect(ringChunks(100, 4, undefined, 0, 0).map((c) => c.count)).toEqual([25, 25, 25, 25]);
  });
});

describe('verified allreduce: honest sums pass', () => {
  for (const size of [1, 2, 3, 4, 5]) {
    it(`${size} rank(s), lengths 0..40,000, magnitudes 1e-8..1e8 with cancellations: no chunk is wrong on any rank`, async () => {
      for (const n of [0, 7, 1000, 40000]) {
        const comms = createMemoryRing(size);
        const { wrongAt } = await verifiedRound(comms, n, stepSeed(3, n));
        expect(wrongAt, `size ${size}, n ${n}`).toEqual(comms.map(() => []));
        comms.forEach((c) => c.close());
      }
    });
  }
});

describe('verified allreduce: changes are caught and the link named', () => {
  it('one element changed by 1e-4 of its value is caught; rounding-sized changes are not', () => {
    const n = 3000;
    const chunks = ringChunks(n, 1);
    const x = hostile(n, 5);
    const seed = stepSeed(1, 1);
    const published = [chunkSketches(x, chunks, K, seed)];
    const big = x.findIndex((v) => Math.abs(v) > 1e6);
    const changed = x.slice();
    changed[big] *= 1 + 1e-4;
    expect(wrongChunks(changed, chunks, published, K, seed, 1)).toEqual([0]);
    const nudged = x.slice();
    nudged[big] = Math.fround(nudged[big] * (1 + 2 ** -23));
    expect(wrongChunks(nudged, chunks, published, K, seed, 1)).toEqual([]);
    const nan = x.slice();
    nan[0] = NaN;
    expect(wrongChunks(nan, chunks, published, K, seed, 1)).toEqual([0]);
  });

  it('suspectLinks: allgather corruption names the link into the first wrong rank; reduce-scatter corruption narrows by intersection', () => {
    const chunks = ringChunks(3 * 100000, 3);
    // Link 1 → 2 corrupted everything it carried: chunk 1 in allgather (seen by 2 only), chunks 0 and 2 in
    // reduce-scatter.
    expect(
      suspectLinks(
        [
          [0, 2],
          [0, 2],
          [0, 1, 2],
        ],
        chunks,
        3,
      ),
    ).toEqual([{ from: 1, to: 2 }]);
    // Only chunk 0 wrong everywhere: reduce-scatter path 1 → 2 → 0.
    expect(suspectLinks([[0], [0], [0]], chunks, 3)).toEqual([
      { from: 1, to: 2 },
      { from: 2, to: 0 },
    ]);
    expect(suspectLinks([[], [], []], chunks, 3)).toEqual([]);
    // Chunk 2 seen wrong by rank 1 only (owner 2 → 0 → 1): the link 0 → 1 in allgather.
    expect(suspectLinks([[], [2], []], chunks, 3)).toEqual([{ from: 0, to: 1 }]);
  });

  for (const size of [3, 4, 5]) {
    it(`${size} ranks: a link that flips bits (the chaos flip-bits of rank 1) is named, as 1 → 2`, async () => {
      const comms = createMemoryRing(size);
      const { wrongAt, chunks } = await verifiedRound(comms, 20000, stepSeed(9, size), (cs) => flipBitsOnSend(cs[1]));
      expect(wrongAt.some((w) => w.length > 0)).toBe(true);
      expect(suspectLinks(wrongAt, chunks, size)).toEqual([{ from: 1, to: 2 % size }]);
      comms.forEach((c) => c.close());
    });
  }
});

describe('verified allreduce on its cached agreement (no negotiation)', () => {
  for (const size of [2, 3, 4]) {
    it(`${size} ranks: a repeated observed allreduce negotiates nothing, and a link that flips bits, its fingerprint's too, is named 1 → ${2 % size}`, async () => {
      const comms = createMemoryRing(size);
      const phases = comms.map(() => [] as string[]);
      comms.forEach((c, r) => c.events.on((e) => void (e.type === 'phase-begin' && phases[r].push(e.phase))));
      // The first round agrees (negotiates) and fills the cache; an honest one passes.
      const first = await verifiedRound(comms, 20000, stepSeed(3, size), undefined, true);
      expect(first.wrongAt.every((w) => w.length === 0)).toBe(true);
      expect(phases.every((p) => p.includes('negotiate'))).toBe(true);
      phases.forEach((p) => p.splice(0));
      // Every message of rank 1 to rank 2, the first one's fingerprint included, arrives with bits flipped:
      // no rank falls back or aborts, and the checks after the sum name the link.
      const { wrongAt, chunks } = await verifiedRound(
        comms,
        20000,
        stepSeed(4, size),
        (cs) => flipBitsOnSend(cs[1]),
        true,
      );
      expect(phases.map((p) => p.filter((x) => x === 'negotiate').length)).toEqual(comms.map(() => 0));
      expect(comms.every((c) => c.error === null || c.error === undefined)).toBe(true);
      expect(suspectLinks(wrongAt, chunks, size)).toEqual([{ from: 1, to: 2 % size }]);
      comms.forEach((c) => c.close());
    });
  }
});
