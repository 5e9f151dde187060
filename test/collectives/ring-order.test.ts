/**
 * RTT-aware ring order: the greedy tour against a brute-force oracle, the
 * pairing schedule of the round-trip measurement, and the measurement itself
 * over the memory transport (its shape only: tests do not time things).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce } from '../../src/collectives/allreduce.ts';
import { reorderedCommunicator } from '../../src/comm/reordered.ts';
import {
  hopCostsMs,
  measureLinks,
  measureRtt,
  pairRounds,
  ringOrder,
  tourCost,
  type LinkMeasurements,
} from '../../src/collectives/ring-order.ts';

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

/**
 * A mixed job as the measurements would show it: `kinds[r]` says whether rank r is a native
 * worker (TCP between two of them: fast, short) or a tab (WebRTC to anyone: slow, longer).
 */
function mixedJob(kinds: ('native' | 'tab')[]): LinkMeasurements {
  const tcp = (a: number, b: number) => kinds[a] === 'native' && kinds[b] === 'native';
  return {
    rttMs: kinds.map((_, a) =>
      kinds.map((_, b) => (a === b ? 0 : tcp(a, b) ? 0.2 + 0.01 * (a + b) : 1 + 0.01 * a * b)),
    ),
    mbps: kinds.map((_, a) => kinds.map((_, b) => (a === b ? Infinity : tcp(a, b) ? 800 : 70))),
  };
}

/** Hops of a closed tour whose link is slower than `mbps`. */
const slowHops = (m: LinkMeasurements, order: number[], mbps: number) =>
  order.filter((a, i) => m.mbps[a][order[(i + 1) % order.length]] < mbps).length;

describe('ring order', () => {
  it('by bandwidth too: a mixed ring crosses WebRTC as few times as it can (the tabs in a row)', () => {
    for (const kinds of [
      ['native', 'tab', 'native', 'tab', 'native', 'tab'],
      ['native', 'tab', 'tab', 'native', 'native', 'tab', 'native'],
      ['tab', 'native', 'tab', 'native'],
    ] as ('native' | 'tab')[][]) {
      const m = mixedJob(kinds);
      const order = ringOrder(hopCostsMs(m));
      const tabs = kinds.filter((k) => k === 'tab').length;
      // k tabs in a row: a WebRTC hop into them, k-1 between them, one out.
      expect(slowHops(m, order, 100), kinds.join()).toBe(tabs + 1);
      expect(slowHops(m, order, 100)).toBeLessThan(
        slowHops(
          m,
          kinds.map((_, i) => i),
          100,
        ),
      );
      // Every rank orders from the same shared table: the same order, whatever the row order it was built in.
      expect(ringOrder(hopCostsMs(structuredClone(m)))).toEqual(order);
    }
  });

  it('by bandwidth too: avoids links whose round trip is short but whose rate is low (a relayed link)', () => {
    // Equal round trips everywhere; 0-1 and 2-3 move 5 MB/s, the rest 500.
    const slow = (a: number, b: number) => (a ^ 1) === b && a !== b;
    const m: LinkMeasurements = {
      rttMs: [0, 1, 2, 3].map((a) => [0, 1, 2, 3].map((b) => (a === b ? 0 : 1))),
      mbps: [0, 1, 2, 3].map((a) => [0, 1, 2, 3].map((b) => (a === b ? Infinity : slow(a, b) ? 5 : 500))),
    };
    const byRtt = ringOrder(m.rttMs);
    expect(slowHops(m, byRtt, 100)).toBe(2);
    const order = ringOrder(hopCostsMs(m));
    expect(slowHops(m, order, 100)).toBe(0);
    // 8 MiB at 500 MB/s (16.8 ms) plus the 1 ms round trip.
    expect(tourCost(hopCostsMs(m), order).slowest).toBeCloseTo(1 + (8 << 20) / 500e3, 6);
    // Without a probe (bandwidth unknown), the cost is the round trip alone.
    const unprobed = { rttMs: m.rttMs, mbps: m.mbps.map((r) => r.map(() => Infinity)) };
    expect(hopCostsMs(unprobed)).toEqual(m.rttMs);
  });

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

  it('measures round trips and bandwidths, symmetric and the same on every rank (memory transport, N=4)', async () => {
    const comms = createMemoryRing(4);
    const got = await Promise.all(comms.map((c) => measureLinks(c, { pings: 1, probeBytes: 300_000 })));
    comms.forEach((c) => c.close());
    for (const m of got.slice(1)) expect(m).toEqual(got[0]);
    const { rttMs, mbps } = got[0];
    for (let a = 0; a < 4; a++) {
      expect(mbps[a][a]).toBe(Infinity);
      for (let b = 0; b < 4; b++) {
        expect(mbps[a][b]).toBe(mbps[b][a]);
        expect(rttMs[a][b]).toBe(rttMs[b][a]);
        if (a !== b) expect(mbps[a][b], `${a}-${b}`).toBeGreaterThan(0);
        if (a !== b) expect(Number.isFinite(mbps[a][b]), `${a}-${b}`).toBe(true);
      }
    }
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
