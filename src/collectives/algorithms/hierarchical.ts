/**
 * Hierarchical allreduce, as Horovod runs it across hosts: ranks are grouped (the ranks of one
 * host), and the group's fast links carry most of the work. Three phases:
 *
 *   1. inside each group, a ring reduce-scatter: the tensor is cut into S shards (S the size of
 *      the smallest group), shard j ends reduced over the group on its member j;
 *   2. across groups, for each j < S, the members j of all groups run a ring allreduce of shard j
 *      (a reduce-scatter and an allgather among them): one rank per group, the "leaders" of that shard;
 *   3. inside each group, a ring allgather spreads the S shards to every member.
 *
 * With groups of g ranks on G = N/g hosts each rank sends 2(g-1)/g of the tensor inside its group
 * and 2(G-1)/G of a shard (1/g of it) across, in 2(g-1) + 2(G-1) steps instead of the flat ring's
 * 2(N-1). In a larger group, members past S own no shard (their chunk of the inner rings is
 * empty): they feed phase 1 and receive in phase 3; with S = 1 it is the reduce-to-leader,
 * ring-across-leaders, broadcast-back shape.
 *
 * The communicator knows nothing of hosts, so the groups come from the caller
 * (ReduceOptions.groups: a rank count per host, consecutive ranks together, or the ranks of each
 * host listed); negotiation compares them, so every rank must pass the same. Forced without
 * groups, it groups consecutive ranks by the power of two nearest sqrt N, as the cost model
 * assumes. 'auto' picks it only when groups are given (two or more, one with several ranks), for
 * what the ring would otherwise take.
 *
 * Every rank ends with the same bits: each piece of a shard is reduced on one rank only (phase 2),
 * which rounds it through the codec before it is sent on, and the phase 2 and 3 allgathers
 * forward exact bytes. Every hop sends at least one message, an empty one for an empty chunk,
 * so every rank's result waits on a chain of checked messages from every rank (the fast path's
 * rule, run.ts).
 *
 * Tags: the phase the registry gives it; step = sub-phase (0-3, in the order above, phase 2 being
 * two) times STEPS_PER_RING plus the ring's step; segment index in `chunk`.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { splitEven } from '../codecs/partition.ts';
import { finish, scaleInPlace } from '../codecs/reduce.ts';
import type { Run } from '../controller/run.ts';
import type { RankGroups, ReduceOp, Tensor } from '../codecs/types.ts';
import { codecFor, roundTripInPlace, type Codec } from '../codecs/wire.ts';
import { ringAllgather, ringReduceScatter, type RingSpec } from '../transfer/ring.ts';
import { defineAllreduceAlgorithm, type AllreduceCost, type LinkCost } from './registry.ts';
import { ringCost } from './ring.ts';

/** Steps one sub-phase's ring may take (ranks in one ring): four sub-phases fit the tag's 16 bits. */
const STEPS_PER_RING = 1 << 14;
const INNER_REDUCE_SCATTER = 0;
const CROSS_REDUCE_SCATTER = 1;
const CROSS_ALLGATHER = 2;
const INNER_ALLGATHER = 3;

const invalid = (message: string) => new RingtrainError(ErrorCode.InvalidArgument, message);

/** Ranks per group when none are given: the power of two nearest sqrt(N), at least 2 (and at most N). */
export function defaultGroupSize(n: number): number {
  return Math.min(n, Math.max(2, 2 ** Math.round(Math.log2(Math.sqrt(n)))));
}

/** Consecutive ranks, `perGroup` to a group (the last one may have fewer). */
function consecutive(size: number, perGroup: number): number[][] {
  return Array.from({ length: Math.ceil(size / perGroup) }, (_, k) =>
    Array.from({ length: Math.min(perGroup, size - k * perGroup) }, (_, i) => k * perGroup + i),
  );
}

/**
 * The groups of `size` ranks that ReduceOptions.groups describes (default: defaultGroupSize), each
 * sorted, ordered by their lowest rank; refused, saying what is wrong, unless every rank is in
 * exactly one.
 */
export function rankGroups(groups: RankGroups | undefined, size: number): number[][] {
  const want = 'give ranks per host (a whole number) or every rank once, e.g. [[0, 1], [2, 3]]';
  if (groups === undefined) return consecutive(size, defaultGroupSize(size));
  if (typeof groups === 'number') {
    if (!Number.isInteger(groups) || groups < 1)
      throw invalid(`allreduce groups: ${groups} ranks per group is not a whole number from 1; ${want}`);
    return consecutive(size, groups);
  }
  if (!Array.isArray(groups) || groups.some((g) => !Array.isArray(g) || g.length === 0))
    throw invalid(`allreduce groups: ${JSON.stringify(groups)} is not a list of non-empty lists of ranks; ${want}`);
  const seen = new Array<number>(size).fill(0);
  for (const r of groups.flat()) {
    if (!Number.isInteger(r) || r < 0 || r >= size)
      throw invalid(`allreduce groups: ${JSON.stringify(r)} is not a rank of this ring (0..${size - 1}); ${want}`);
    seen[r]++;
  }
  const wrong = seen.findIndex((n) => n !== 1);
  if (wrong >= 0)
    throw invalid(`allreduce groups: rank ${wrong} is in ${seen[wrong]} groups of ${JSON.stringify(groups)}; ${want}`);
  return groups.map((g) => [...g].sort((a, b) => a - b)).sort((a, b) => a[0] - b[0]);
}

/** Who this rank reduces with: its group, its place there, the shards and, for a shard's owner, the ring across groups. */
interface Place {
  group: number[];
  local: number;
  shards: number;
  /** The members `local` of every group, when this rank owns a shard (local < shards). */
  across: number[] | null;
}

function placeOf(groups: number[][], rank: number): Place {
  const group = groups.find((g) => g.includes(rank))!;
  const local = group.indexOf(rank);
  const shards = Math.min(...groups.map((g) => g.length));
  return { group, local, shards, across: local < shards ? groups.map((g) => g[local]) : null };
}

/** Sub-phase `sub`'s ring among `members`: its steps tagged apart from the other sub-phases'. */
function ringOf(members: number[], phase: number, sub: number): RingSpec {
  return { members, phase, firstStep: sub * STEPS_PER_RING, label: 'hierarchical', emptyChunkMessages: true };
}

/** Reduces `buf` in place over all ranks in `groups`; `done` (average, postscale) runs once on each piece this rank finishes. */
export async function hierarchicalAllreduce(
  run: Run,
  buf: Tensor,
  groups: number[][],
  op: ReduceOp,
  codec: Codec,
  done: (t: Tensor) => void,
  phase: number,
): Promise<void> {
  const { group, local, shards, across } = placeOf(groups, run.comm.rank);
  // Shard j is member j's chunk of the inner rings; members past the shards own an empty one.
  const shardRanges = splitEven(buf.length, shards);
  const inner = group.map((_, l) => shardRanges[l] ?? { offset: buf.length, count: 0 });
  await ringReduceScatter(run, buf, inner, op, codec, { ring: ringOf(group, phase, INNER_REDUCE_SCATTER) });
  if (across) {
    const shard = inner[local];
    const pieceRanges = splitEven(shard.count, across.length).map((r) => ({ ...r, offset: r.offset + shard.offset }));
    await ringReduceScatter(run, buf, pieceRanges, op, codec, { ring: ringOf(across, phase, CROSS_REDUCE_SCATTER) });
    const own = pieceRanges[across.indexOf(run.comm.rank)];
    const mine = buf.subarray(own.offset, own.offset + own.count);
    done(mine);
    roundTripInPlace(codec, mine);
    await ringAllgather(run, buf, pieceRanges, codec, { ring: ringOf(across, phase, CROSS_ALLGATHER) });
  }
  await ringAllgather(run, buf, inner, codec, { ring: ringOf(group, phase, INNER_ALLGATHER) });
}

/**
 * Rings of g inside, a ring of G = ceil(N/g) groups between on 1/g of the tensor:
 * 2(g-1) alpha + 2(g-1)/g n beta + 2(G-1) alpha + 2(G-1)/G (n/g) beta. Exact for groups of one
 * size; where one is smaller, the shards are as many as its ranks, so each is larger than n/g.
 */
export function hierarchicalCost(
  n: number,
  bytes: number,
  link: LinkCost,
  groupSize = defaultGroupSize(n),
): AllreduceCost {
  if (n <= 1) return { s: 0, bytesSent: 0, messages: 0 };
  const g = Math.min(groupSize, n);
  const inner = ringCost(g, bytes, link);
  const outer = ringCost(Math.ceil(n / g), bytes / g, link);
  return {
    s: inner.s + outer.s,
    bytesSent: inner.bytesSent + outer.bytesSent,
    messages: inner.messages + outer.messages,
  };
}

/** After the middle algorithms, before the ring: what the ring would take, when ranks are grouped by host. */
export const HIERARCHICAL = defineAllreduceAlgorithm({
  name: 'hierarchical',
  order: 40,
  enabled: ({ groups }) => groups !== undefined && groups.length > 1 && groups.some((g) => g.length > 1),
  run: (run, buf, s, phase) => {
    const groups = rankGroups(s.groups, run.comm.size);
    if (groups.some((g) => g.length > STEPS_PER_RING) || groups.length > STEPS_PER_RING)
      throw invalid(`hierarchical allreduce: a ring of more than ${STEPS_PER_RING} ranks; use the ring`);
    scaleInPlace(buf, s.prescale);
    const codec = codecFor(s.compression, buf);
    const done = (t: Tensor) => finish(t, s, run.comm.size);
    return run.phase('hierarchical', () => hierarchicalAllreduce(run, buf, groups, s.op, codec, done, phase));
  },
  cost: (n, bytes, link, groupSize) => hierarchicalCost(n, bytes, link, groupSize),
});
