/**
 * The hierarchical allreduce (src/collectives/algorithms/hierarchical.ts) over memory links: every
 * rank's result against the float64 reference on 1 to 8 ranks, for many group shapes (consecutive,
 * interleaved, uneven, one group, one rank per group), odd lengths and lengths below the number of
 * ranks; who talks to whom and how much (the reason it exists); where 'auto' picks it; the groups
 * refused; the response cache's fast path. The same over real WebRTC: hierarchical-webrtc.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, autoAlgorithm, chooseAlgorithm, reduceSettings } from '../../src/collectives/allreduce.ts';
import { HIERARCHICAL, rankGroups, ringCost } from '../../src/collectives/algorithms/index.ts';
import { REDUCE_OPS, type RankGroups, type Tensor } from '../../src/collectives/codecs/types.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { allreduceCost } from '../../src/sim/cost-model.ts';
import { expectCachedFallback } from './cached-fallback.ts';
import { input, reference, tolerance, valuesOf, type Kind } from './reference.ts';

const KINDS: Kind[] = ['float32', 'int32', 'fp16', 'float16', 'int8'];
/** Every op on float32 and int32; sums and averages on the rest (their arithmetic is the ring's, tested in grid.test.ts). */
const opsFor = (kind: Kind) => (kind === 'float32' || kind === 'int32' ? REDUCE_OPS : (['sum', 'average'] as const));
const bytesOf = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);

/** Group shapes for `size` ranks, each named: undefined is the default grouping (forced, no groups given). */
function shapesFor(size: number): [string, RankGroups | undefined][] {
  const shapes: [string, RankGroups | undefined][] = [
    ['default', undefined],
    ['2 per host', 2],
    ['3 per host', 3],
    ['one group', [range(0, size)]],
    ['one rank per group', 1],
  ];
  if (size > 1) {
    shapes.push([
      'interleaved',
      [range(0, size).filter((r) => r % 2 === 0), range(0, size).filter((r) => r % 2 === 1)],
    ]);
    shapes.push(['a lone rank and the rest', [[size - 1], range(0, size - 1)]]);
  }
  return shapes;
}

/** One allreduce on `comms` (a ring reused call after call: later calls of a shape go ahead on the cached agreement). */
async function check(
  comms: Communicator[],
  groups: RankGroups | undefined,
  count: number,
  op: (typeof REDUCE_OPS)[number],
  kind: Kind,
) {
  const size = comms.length;
  const inputs = comms.map((_, r) => input(kind, op, count, r));
  const opts = {
    algorithm: 'hierarchical',
    groups,
    op,
    // Tiny segments on small tensors, so every multi-segment path runs; fewer messages on the large one.
    segmentBytes: count <= 101 ? 8 : 256,
    compression: kind === 'fp16' ? ('fp16' as const) : ('none' as const),
  };
  const out = await Promise.all(comms.map((c, r) => allreduce(c, inputs[r], opts)));
  const where = `size=${size} groups=${JSON.stringify(groups)} count=${count} op=${op} kind=${kind}`;
  // Every rank ends with bitwise the same tensor.
  for (const o of out) expect(Buffer.compare(bytesOf(o), bytesOf(out[0])), where).toBe(0);
  const ref = reference(op, inputs);
  const got = valuesOf(out[0]);
  for (let i = 0; i < count; i++) {
    const off = Math.abs(got[i] - ref[i]);
    if (!(off <= tolerance(kind, op, inputs, i, ref[i])))
      expect.fail(`${where}: element ${i} is ${got[i]}, reference ${ref[i]}`);
  }
}

describe('hierarchical allreduce results', () => {
  for (let size = 1; size <= 8; size++) {
    it(`${size} rank(s): every group shape, op and dtype; odd lengths and lengths below the ranks`, async () => {
      const comms = createMemoryRing(size);
      for (const [, groups] of shapesFor(size))
        for (const count of [0, 1, size - 1, 7, 101, 1001])
          for (const kind of KINDS) for (const op of opsFor(kind)) await check(comms, groups, count, op, kind);
      comms.forEach((c) => c.close());
    });
  }
});

type Send = Extract<RingEvent, { type: 'chunk-send' }>;

function sendsOf(comm: Communicator): Send[] {
  const out: Send[] = [];
  comm.events.on((e: RingEvent) => e.type === 'chunk-send' && e.phase === 'hierarchical' && out.push(e));
  return out;
}

describe('hierarchical allreduce on the wire', () => {
  it('2 hosts of 3: rings inside each host and, per shard, between the hosts; 2(g-1)/g + 2(G-1)/(Gg) of the tensor per rank', async () => {
    const groups = [
      [0, 2, 4],
      [1, 3, 5],
    ];
    const comms = createMemoryRing(6);
    const sends = comms.map(sendsOf);
    const count = 6001;
    const out = await Promise.all(
      comms.map((c, r) =>
        allreduce(
          c,
          Int32Array.from({ length: count }, (_, k) => r * 1000 + k),
          { algorithm: 'hierarchical', groups },
        ),
      ),
    );
    for (const o of out) expect([o[0], o[count - 1]]).toEqual([15_000, 15_000 + 6 * (count - 1)]);
    const hostOf = (r: number) => groups.findIndex((g) => g.includes(r));
    const placeOf = (r: number) => groups[hostOf(r)].indexOf(r);
    sends.forEach((s, r) => {
      for (const e of s) {
        // Inside the host to the next member, or across to the member in the same place of the other host.
        if (hostOf(e.to) === hostOf(r)) expect(placeOf(e.to), `rank ${r}`).toBe((placeOf(r) + 1) % 3);
        else expect(placeOf(e.to), `rank ${r}`).toBe(placeOf(r));
      }
      const inside = s.filter((e) => hostOf(e.to) === hostOf(r)).reduce((a, e) => a + e.count, 0);
      const across = s.filter((e) => hostOf(e.to) !== hostOf(r)).reduce((a, e) => a + e.count, 0);
      // Each rank sends 2(g-1)/g of the tensor inside (give or take the odd element) and 2(G-1)/G of its shard across.
      expect(Math.abs(inside - (4 * count) / 3), `rank ${r}`).toBeLessThanOrEqual(2);
      expect(Math.abs(across - count / 3), `rank ${r}`).toBeLessThanOrEqual(1);
    });
    comms.forEach((c) => c.close());
  });

  it('a lone rank beside a group of 3: one shard, reduced to the leaders, across, and back; every hop sends even when empty', async () => {
    const comms = createMemoryRing(4);
    const sends = comms.map(sendsOf);
    const out = await Promise.all(
      comms.map((c, r) =>
        allreduce(c, Float32Array.of(r + 0.5), { algorithm: 'hierarchical', groups: [[0, 1, 2], [3]] }),
      ),
    );
    for (const o of out) expect(Array.from(o)).toEqual([8]);
    // Ranks 1 and 2 own no shard: they only talk inside their group.
    for (const r of [1, 2]) expect(new Set(sends[r].map((e) => e.to)), `rank ${r}`).toEqual(new Set([(r + 1) % 3]));
    expect(sends[3].map((e) => e.to)).toEqual([0, 0]);
    expect(sends.flat().some((e) => e.count === 0)).toBe(true);
    comms.forEach((c) => c.close());
  });

  it('costs as the cost model said: rings of g inside, a ring of N/g groups on 1/g of the tensor', () => {
    const link = { alphaS: 1e-3, betaSPerByte: 1e-8 };
    const n = 1 << 20;
    const want = ringCost(4, n, link).s + ringCost(4, n / 4, link).s;
    expect(HIERARCHICAL.cost(16, n, link, 4).s).toBeCloseTo(want, 12);
    expect(allreduceCost('hierarchical', 16, n, link, 4)).toEqual(HIERARCHICAL.cost(16, n, link, 4));
    // Without a group size: the default grouping (4 on 16 ranks).
    expect(HIERARCHICAL.cost(16, n, link)).toEqual(HIERARCHICAL.cost(16, n, link, 4));
  });
});

describe("hierarchical in 'auto', and its groups", () => {
  it("'auto' picks it only with groups given (two or more, one with several ranks), where it would go round the ring", () => {
    const [small, medium] = [1024, 16384];
    for (let size = 1; size <= 12; size++)
      for (const bytes of [0, small, small + 4, medium, medium + 4, 1 << 20])
        for (const perHost of [1, 2, 3, size]) {
          const t = new Float32Array(bytes / 4);
          const s = reduceSettings(t, { smallBytes: small, mediumBytes: medium, groups: perHost }, 'test');
          const before = autoAlgorithm(bytes, size, small, medium);
          const grouped = Math.ceil(size / perHost) > 1 && perHost > 1;
          expect(chooseAlgorithm(s, bytes, size), `${bytes} bytes, ${size} ranks, ${perHost} per host`).toBe(
            before === 'ring' && grouped ? 'hierarchical' : before,
          );
        }
    // A reduction that needs the ring's path still goes round it.
    const t = new Float32Array(1 << 18);
    const at = (o: object) =>
      chooseAlgorithm(reduceSettings(t, { groups: 2, mediumBytes: 16384, ...o }, 'test'), t.byteLength, 4);
    expect(at({})).toBe('hierarchical');
    expect(at({ compression: 'fp16' })).toBe('hierarchical');
    expect(at({ compression: 'int8' })).toBe('ring');
    expect(at({ observeReceived: () => {} })).toBe('ring');
    expect(() => at({ compression: 'int8', algorithm: 'hierarchical' })).toThrow(/run on the ring only/);
  });

  it('groups: ranks per host or every rank listed once; anything else is refused, saying what is wrong', () => {
    expect(rankGroups(2, 5)).toEqual([[0, 1], [2, 3], [4]]);
    expect(
      rankGroups(
        [
          [3, 1],
          [2, 0],
        ],
        4,
      ),
    ).toEqual([
      [0, 2],
      [1, 3],
    ]);
    expect(rankGroups(undefined, 16)).toEqual([range(0, 4), range(4, 8), range(8, 12), range(12, 16)]);
    const t = new Float32Array(8);
    const choose = (groups: unknown) =>
      chooseAlgorithm(reduceSettings(t, { groups: groups as RankGroups }, 'test'), t.byteLength, 4);
    for (const [groups, why] of [
      [0, /0 ranks per group is not a whole number from 1/],
      [1.5, /1.5 ranks per group/],
      [
        [
          [0, 1],
          [1, 2, 3],
        ],
        /rank 1 is in 2 groups/,
      ],
      [[[0, 1], [2]], /rank 3 is in 0 groups/],
      [
        [
          [0, 1],
          [2, 3, 4],
        ],
        /4 is not a rank of this ring \(0..3\)/,
      ],
      [[[0, 1, 2, 3], []], /is not a list of non-empty lists of ranks/],
      ['0,1', /is not a list of non-empty lists/],
    ] as const) {
      let err: unknown;
      try {
        choose(groups);
      } catch (e) {
        err = e;
      }
      expect((err as { code: string }).code, JSON.stringify(groups)).toBe(ErrorCode.InvalidArgument);
      expect((err as Error).message).toMatch(why);
      expect((err as Error).message).toMatch(/every rank once, e\.g\. \[\[0, 1\], \[2, 3\]\]/);
    }
  });

  it('ranks that give different groups are refused on every rank, naming them, and nothing is summed', async () => {
    const comms = createMemoryRing(4);
    const inputs = comms.map(() => new Float32Array(300).fill(1));
    const results = await Promise.allSettled(
      comms.map((c, r) =>
        allreduce(c, inputs[r], { algorithm: 'hierarchical', groups: r === 3 ? [[0, 1, 3], [2]] : 2, timeoutMs: 2000 }),
      ),
    );
    for (const x of results) {
      expect(x.status).toBe('rejected');
      const e = (x as PromiseRejectedResult).reason as { code: string; message: string };
      expect(e.code).toBe(ErrorCode.Mismatch);
      expect(e.message).toMatch(/rank 3 sent allreduce 'allreduce' float32\[300\] op=sum groups=\[\[0,1,3\],\[2\]\]/);
    }
    for (const t of inputs) expect(t.every((v) => v === 1)).toBe(true);
    comms.forEach((c) => c.close());
  });

  it('a cached allreduce goes ahead without the coordinator; a rank that missed brings the others back, buffers as they were', async () => {
    await expectCachedFallback('hierarchical', 6, 4);
    await expectCachedFallback('hierarchical', 5, 0);
  });
});
