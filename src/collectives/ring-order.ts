/**
 * RTT-aware ring order. A ring allreduce moves at the pace of its slowest
 * hop, so on internet links the order of the peers matters: two peers on the
 * same continent should be neighbours. Given the measured round trips between
 * every pair, `ringOrder` picks a tour that keeps the slowest hop small, near the least (not always the least)
 * (greedy: from every start, always go to the nearest unvisited peer, then
 * 2-opt reversals while they lower the slowest hop or, at equal slowest, the
 * total; keep the best tour). At a few dozen peers
 * this is instant, and it is what the ring re-forms with on a membership change.
 *
 * `measureLinks` times a small ping-pong and a short transfer between every pair
 * over a communicator and shares the rows, so every rank computes the same
 * order; `hopCostsMs` turns them into what a hop costs a gradient bucket, so a
 * mixed ring (TCP in a rack, WebRTC to tabs) crosses its slow links few times.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { allgather } from './allgather.ts';

/** The slowest hop and the total of a closed tour over `rtt`. */
export function tourCost(rtt: number[][], order: number[]): { slowest: number; total: number } {
  let slowest = 0;
  let total = 0;
  for (let i = 0; i < order.length; i++) {
    const hop = rtt[order[i]][order[(i + 1) % order.length]];
    slowest = Math.max(slowest, hop);
    total += hop;
  }
  return { slowest, total };
}

/** A ring order (a permutation of 0..n-1 starting at 0) with a small slowest hop. */
export function ringOrder(rtt: number[][]): number[] {
  const n = rtt.length;
  for (const row of rtt) {
    if (row.length !== n || row.some((v) => !(v >= 0) || !Number.isFinite(v))) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `ringOrder: the round trips must be a square matrix of finite numbers >= 0 (${n} rows)`,
      );
    }
  }
  if (n <= 2) return Array.from({ length: n }, (_, i) => i);
  // Links are used both ways round the ring over a run: judge a pair by its worse direction.
  const d = (a: number, b: number) => Math.max(rtt[a][b], rtt[b][a]);
  const sym = rtt.map((row, a) => row.map((_, b) => d(a, b)));
  let best: number[] = [];
  let bestCost = { slowest: Infinity, total: Infinity };
  for (let start = 0; start < n; start++) {
    const tour = [start];
    const left = new Set(Array.from({ length: n }, (_, i) => i).filter((i) => i !== start));
    while (left.size > 0) {
      const at = tour[tour.length - 1];
      let next = -1;
      for (const c of left) if (next < 0 || sym[at][c] < sym[at][next]) next = c;
      tour.push(next);
      left.delete(next);
    }
    const cost = improve(sym, tour);
    if (cost.slowest < bestCost.slowest || (cost.slowest === bestCost.slowest && cost.total < bestCost.total)) {
      best = tour;
      bestCost = cost;
    }
  }
  // Rotate so rank 0 leads: the same ring, written the same way on every rank.
  const at0 = best.indexOf(0);
  return [...best.slice(at0), ...best.slice(0, at0)];
}

/** A tag id no collective reaches (their ids count up from 0 per communicator). */
const better = (x: { slowest: number; total: number }, y: { slowest: number; total: number }) =>
  x.slowest < y.slowest - 1e-9 || (x.slowest <= y.slowest + 1e-9 && x.total < y.total - 1e-9);

/** 2-opt in place: reverse a stretch of the tour while that lowers (slowest hop, total); returns the final cost. */
function improve(d: number[][], tour: number[]): { slowest: number; total: number } {
  let cost = tourCost(d, tour);
  for (let changed = true; changed;) {
    changed = false;
    for (let i = 1; i < tour.length - 1; i++) {
      for (let j = i + 1; j < tour.length; j++) {
        const trial = [...tour.slice(0, i), ...tour.slice(i, j + 1).reverse(), ...tour.slice(j + 1)];
        const c = tourCost(d, trial);
        if (better(c, cost)) {
          tour.splice(0, tour.length, ...trial);
          cost = c;
          changed = true;
        }
      }
    }
  }
  return cost;
}

const PING_ID = 0xfffffff0;

/** Round-robin rounds (the circle method): each round pairs every rank with at most one other. */
export function pairRounds(size: number): [number, number][][] {
  const n = size % 2 === 0 ? size : size + 1; // an odd size gets a rank that sits out
  const ring = Array.from({ length: n }, (_, i) => i);
  const rounds: [number, number][][] = [];
  for (let r = 0; r < n - 1; r++) {
    const pairs: [number, number][] = [];
    for (let i = 0; i < n / 2; i++) {
      const [a, b] = [ring[i], ring[n - 1 - i]];
      if (a < size && b < size) pairs.push(a < b ? [a, b] : [b, a]);
    }
    rounds.push(pairs);
    ring.splice(1, 0, ring.pop()!); // keep the first, rotate the rest
  }
  return rounds;
}

/** What measureLinks found between every pair of ranks, the same on every rank. */
export interface LinkMeasurements {
  /** Round trips (ms), symmetric, 0 on the diagonal. */
  rttMs: number[][];
  /** Bandwidth (MB/s) of a timed transfer, symmetric, Infinity on the diagonal (and everywhere when no probe was sent). */
  mbps: number[][];
}

/**
 * Bytes each hop of a ring carries in the cost that orders it: a gradient bucket's worth, where
 * a slow link (a relayed or home WebRTC link beside TCP in a rack) costs far more than its round trip.
 */
export const HOP_BYTES = 8 << 20;

/**
 * The time (ms) to move `hopBytes` over each link: its round trip plus the bytes at its measured
 * rate. ringOrder on these keeps the slow links of a mixed ring few: it runs through all tabs in
 * a row rather than in and out of them.
 */
export function hopCostsMs(m: LinkMeasurements, hopBytes = HOP_BYTES): number[][] {
  return m.rttMs.map((row, a) =>
    row.map((rtt, b) => (a === b ? 0 : rtt + (Number.isFinite(m.mbps[a][b]) ? hopBytes / (m.mbps[a][b] * 1e3) : 0))),
  );
}

/** Round trips (ms) between every pair of ranks, the same matrix on every rank (measureLinks without the probe). */
export async function measureRtt(
  comm: Communicator,
  o: { pings?: number; timeoutMs?: number } = {},
): Promise<number[][]> {
  return (await measureLinks(comm, { ...o, probeBytes: 0 })).rttMs;
}

/** Shortest transfer time credited to a probe (ms): one that beats the clock reads as very fast, not infinitely. */
const MIN_PROBE_MS = 1e-3;

/**
 * Round trips and bandwidth between every pair of ranks, the same on every rank: in rounds of
 * disjoint pairs, the lower rank pings, the higher answers, `pings` times, keeping the fastest
 * (the one least disturbed by other traffic); then the lower rank sends `probeBytes` (default
 * 1 MiB; 0 sends none) and the higher acknowledges it: the transfer time is that exchange less
 * the fastest round trip.
 */
export async function measureLinks(
  comm: Communicator,
  o: { pings?: number; probeBytes?: number; timeoutMs?: number } = {},
): Promise<LinkMeasurements> {
  const { rank, size } = comm;
  const pings = o.pings ?? 3;
  const probeBytes = o.probeBytes ?? 1 << 20;
  const timeoutMs = o.timeoutMs ?? 10_000;
  // Round trips in the first half, bandwidths in the second (0: not measured, read as Infinity).
  const mine = new Float32Array(2 * size);
  const rounds = pairRounds(size);
  for (let r = 0; r < rounds.length; r++) {
    const pair = rounds[r].find(([a, b]) => a === rank || b === rank);
    if (!pair) continue;
    const [a, b] = pair;
    const exchange = async (k: number, bytes: number): Promise<number> => {
      const tag = { id: PING_ID, step: r, chunk: k };
      if (rank !== a) {
        await comm.recv(a, tag, timeoutMs);
        await comm.send(a, tag, new Uint8Array(8));
        return 0;
      }
      const t0 = performance.now();
      await comm.send(b, tag, new Uint8Array(bytes));
      await comm.recv(b, tag, timeoutMs);
      return performance.now() - t0;
    };
    let fastest = Infinity;
    for (let k = 0; k < pings; k++) fastest = Math.min(fastest, await exchange(k, 8));
    const probeMs = probeBytes > 0 ? await exchange(pings, probeBytes) : 0;
    if (rank !== a) continue;
    mine[b] = fastest;
    if (probeBytes > 0) mine[size + b] = probeBytes / Math.max(probeMs - fastest, MIN_PROBE_MS) / 1e3;
  }
  // Each rank knows the links it measured; the matrices are made symmetric from them.
  const rows = await allgather(comm, mine, { name: 'link-rows', timeoutMs });
  const row = (i: number, half: number) => Array.from(rows.subarray((2 * i + half) * size, (2 * i + half + 1) * size));
  const rttMs = Array.from({ length: size }, (_, i) => row(i, 0));
  const mbps = Array.from({ length: size }, (_, i) => row(i, 1).map((v) => (v > 0 ? v : Infinity)));
  for (let a = 0; a < size; a++) {
    for (let b = a + 1; b < size; b++) {
      rttMs[b][a] = rttMs[a][b];
      mbps[b][a] = mbps[a][b];
    }
  }
  return { rttMs, mbps };
}
