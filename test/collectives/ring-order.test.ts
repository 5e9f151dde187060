/**
 * RTT-aware ring order: the greedy tour against a brute-force oracle, the
 * pairing schedule of the round-trip measurement, and the measurement itself
 * over the memory transport (its shape only: tests do not time things).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce } from '../../src/collectives/allreduce.ts';
import { reorderedCommunicator } from '../../src/comm/reordered.ts';
import { measureRtt, pairRounds, ringOrder, tourCost } from '../../src/collectives/ring-order.ts';

/** The least slowest hop over all tours starting at 0 (n <= 8). */
function bruteForce(rtt: number[][]): number {
  const n = rtt.length;
  let best = Infinity;
  const rest = Array.from({ length: n - 1 }, (_, i) => i + 1);
  const permute = (prefix: number[], left: number[]) => {
    if (left.length === 0) return void (best = Math.min(best, tourCost(rtt, prefix).slowest));
    left.forEach((x, i) => permute([...prefix, x], [...left.slice(0, i), ...left.slice(i + 1)]));
  };
  permute([0], rest);
  return best;
}

/** Peers in `sites` clusters (a city each): short hops within a site, long ones between, sites on a line. */
function sites(ranksPerSite: number[], seed: number): number[][] {
  let s = seed;
  const rnd = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  const where = ranksPerSite.flatMap((count, site) => Array.from({ length: count }, () => site));
  // Shuffle which rank lives where, so the identity order is a bad ring.
  for (let i = where.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [where[i], where[j]] = [where[j], where[i]];
  }
  return where.map((a) => where.map((b) => (a === b ? 1 + rnd() : 40 * Math.abs(a - b) + rnd() * 5)));
}

describe('ring order', () => {
  it('on clustered peers: stays within 5% of the brute-force least slowest hop, beats rank order', () => {
    for (const [layout, seed] of [
      [[2, 2], 1],
      [[3, 2, 2], 2],
      [[2, 3, 3], 3],
      [[4, 4], 4],
      [[1, 2, 1, 3], 5],
    ] as [number[], number][]) {
      const rtt = sites(layout, seed);
      const order = ringOrder(rtt);
      expect(
        [...order].sort((a, b) => a - b),
        `${layout}`,
      ).toEqual(rtt.map((_, i) => i));
      expect(order[0]).toBe(0);
      const slowest = tourCost(rtt, order).slowest;
      expect(slowest, `${layout}`).toBeLessThanOrEqual(bruteForce(rtt) * 1.05);
      expect(tourCost(rtt, order).slowest).toBeLessThanOrEqual(
        tourCost(
          rtt,
          rtt.map((_, i) => i),
        ).slowest,
      );
    }
  });

  it('keeps 1 and 2 peers as they are and refuses a matrix that is not square and finite', () => {
    expect(ringOrder([[0]])).toEqual([0]);
    expect(
      ringOrder([
        [0, 5],
        [5, 0],
      ]),
    ).toEqual([0, 1]);
    expect(() => ringOrder([[0, 1], [1]])).toThrow(/square matrix/);
    expect(() =>
      ringOrder([
        [0, NaN],
        [1, 0],
      ]),
    ).toThrow(/finite/);
  });

  it('pairs every two ranks exactly once, each rank at most once per round', () => {
    for (let size = 1; size <= 9; size++) {
      const seen = new Set<string>();
      for (const round of pairRounds(size)) {
        const busy = round.flat();
        expect(new Set(busy).size, `size ${size}`).toBe(busy.length);
        for (const [a, b] of round) seen.add(`${a},${b}`);
      }
      expect(seen.size, `size ${size}`).toBe((size * (size - 1)) / 2);
    }
  });

  it('measures a symmetric matrix, the same on every rank (memory transport, N=5)', async () => {
    const comms = createMemoryRing(5);
    const got = await Promise.all(comms.map((c) => measureRtt(c, { pings: 2 })));
    comms.forEach((c) => c.close());
    for (const m of got.slice(1)) expect(m).toEqual(got[0]);
    const m = got[0];
    for (let a = 0; a < 5; a++) {
      expect(m[a][a]).toBe(0);
      for (let b = 0; b < 5; b++) {
        expect(m[a][b]).toBe(m[b][a]);
        if (a !== b) expect(m[a][b]).toBeGreaterThan(0);
      }
    }
    // The same order on every rank, whatever it is.
    expect(new Set(got.map((x) => ringOrder(x).join())).size).toBe(1);
  });

  it('a ring in the chosen order allreduces correctly, and its ranks follow the order', async () => {
    const order = [0, 3, 1, 4, 2];
    const comms = createMemoryRing(5).map((c) => reorderedCommunicator(c, order));
    expect(comms.map((c) => c.rank)).toEqual([0, 2, 4, 1, 3]);
    const inputs = comms.map((c) => Float32Array.from({ length: 1000 }, (_, i) => (i % 7) + 100 * c.rank));
    const out = await Promise.all(
      comms.map((c, r) => allreduce(c, inputs[r], { name: 'x', algorithm: 'ring', segmentBytes: 256 })),
    );
    comms.forEach((c) => c.close());
    for (const o of out) for (let i = 0; i < 1000; i++) expect(o[i]).toBe(5 * (i % 7) + 100 * (0 + 1 + 2 + 3 + 4));
    const [one] = createMemoryRing(1);
    expect(() => reorderedCommunicator(one, [1])).toThrow(/each of the 1 ranks once/);
    one.close();
  });
});
