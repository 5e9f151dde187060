/** reducescatter, allgather (uneven), broadcast (every root), alltoall (uneven splits), barrier, scaling, fusion. */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import {
  allgather,
  allreduce,
  allreduceFused,
  alltoall,
  barrier,
  broadcast,
  planFusion,
  reducescatter,
  reducescatterRange,
} from '../../src/collectives/index.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import { input, reference } from './reference.ts';

const SEG = 12; // bytes: 3 elements per segment, so every path is multi-segment

function ints(n: number, start: number): Int32Array {
  return Int32Array.from({ length: n }, (_, i) => start + i);
}

describe('reducescatter', () => {
  it('gives each rank its even share of the sum, for uneven lengths', async () => {
    for (const size of [1, 2, 3, 5]) {
      for (const count of [0, 1, 7, 101]) {
        const comms = createMemoryRing(size);
        const inputs = comms.map((_, r) => input('int32', 'sum', count, r));
        const out = await Promise.all(comms.map((c, r) => reducescatter(c, inputs[r], { segmentBytes: SEG })));
        const ref = reference('sum', inputs);
        out.forEach((o, r) => {
          const { offset, count: n } = reducescatterRange(count, size, r);
          expect(Array.from(o)).toEqual(Array.from(ref.subarray(offset, offset + n)));
        });
        comms.forEach((c) => c.close());
      }
    }
  });

  it('averages float32 with prescale and postscale', async () => {
    const comms = createMemoryRing(3);
    const inputs = comms.map((_, r) => input('float32', 'average', 50, r));
    const out = await Promise.all(
      comms.map((c, r) =>
        reducescatter(c, inputs[r], { op: 'average', prescale: 2, postscale: 0.5, segmentBytes: SEG }),
      ),
    );
    const ref = reference('average', inputs, 2, 0.5);
    out.forEach((o, r) => {
      const { offset } = reducescatterRange(50, 3, r);
      o.forEach((v, i) => expect(v).toBeCloseTo(ref[offset + i], 5));
    });
    comms.forEach((c) => c.close());
  });
});

describe('allgather', () => {
  it('concatenates blocks of different lengths (some empty) in rank order', async () => {
    for (const size of [1, 2, 4, 6]) {
      const comms = createMemoryRing(size);
      const lengths = comms.map((_, r) => (r * 5) % 7); // 0, 5, 3, 1, 6, 4
      const inputs = lengths.map((n, r) => ints(n, r * 1000));
      const out = await Promise.all(comms.map((c, r) => allgather(c, inputs[r], { segmentBytes: SEG })));
      const expected = inputs.flatMap((t) => Array.from(t));
      for (const o of out) expect(Array.from(o)).toEqual(expected);
      comms.forEach((c) => c.close());
    }
  });
});

describe('broadcast', () => {
  it('delivers the root tensor from every root', async () => {
    const size = 4;
    const comms = createMemoryRing(size);
    for (let root = 0; root < size; root++) {
      const inputs = comms.map((_, r) => input('float32', 'sum', 37, r, root + 10));
      const out = await Promise.all(comms.map((c, r) => broadcast(c, inputs[r], { root, segmentBytes: SEG })));
      for (const o of out) expect(Array.from(o)).toEqual(Array.from(inputs[root]));
    }
    comms.forEach((c) => c.close());
  });

  it('rejects a root outside the ring', async () => {
    const [c] = createMemoryRing(1);
    await expect(broadcast(c, new Float32Array(2), { root: 3 })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    c.close();
  });
});

describe('alltoall', () => {
  it('routes block j of every rank to rank j, with uneven splits', async () => {
    const size = 4;
    const comms = createMemoryRing(size);
    // splits[r][j]: what rank r sends to rank j
    const splits = comms.map((_, r) => comms.map((__, j) => (r + 2 * j) % 4));
    const inputs = splits.map((row, r) =>
      ints(
        row.reduce((a, b) => a + b, 0),
        r * 100,
      ),
    );
    const out = await Promise.all(
      comms.map((c, r) => alltoall(c, inputs[r], { splits: splits[r], segmentBytes: SEG })),
    );
    for (let j = 0; j < size; j++) {
      const expected: number[] = [];
      for (let r = 0; r < size; r++) {
        const offset = splits[r].slice(0, j).reduce((a, b) => a + b, 0);
        expected.push(...inputs[r].subarray(offset, offset + splits[r][j]));
      }
      expect(Array.from(out[j].data)).toEqual(expected);
      expect(out[j].recvSplits).toEqual(splits.map((row) => row[j]));
    }
    comms.forEach((c) => c.close());
  });

  it('rejects splits that do not add up', async () => {
    const [c] = createMemoryRing(1);
    await expect(alltoall(c, new Int32Array(4), { splits: [3] })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    c.close();
  });
});

describe('barrier', () => {
  it('lets nobody through before everyone arrived', async () => {
    const comms = createMemoryRing(3);
    let arrived = 0;
    const passedWith: number[] = [];
    await Promise.all(
      comms.map(async (c, r) => {
        await new Promise((res) => setTimeout(res, 20 * r));
        arrived++;
        await barrier(c);
        passedWith.push(arrived);
      }),
    );
    expect(passedWith).toEqual([3, 3, 3]);
    comms.forEach((c) => c.close());
  });
});

describe('tensor fusion', () => {
  it('plans groups by threshold and dtype', () => {
    const t = (name: string, n: number, int = false) => ({ name, data: int ? new Int32Array(n) : new Float32Array(n) });
    expect(planFusion([t('a', 10), t('b', 10), t('c', 10), t('d', 100), t('e', 1, true), t('f', 1, true)], 80)).toEqual(
      [[0, 1], [2], [3], [4, 5]],
    );
  });

  it('gives the same results as one allreduce per tensor, in fewer collectives', async () => {
    const size = 3;
    const comms = createMemoryRing(size);
    const shapes = [5, 17, 1, 64, 3, 40];
    const tensors = comms.map((_, r) =>
      shapes.map((n, k) => ({ name: `layer${k}`, data: input('float32', 'sum', n, r, k + 1) })),
    );
    const begins: RingEvent[] = [];
    comms[0].events.on((e) => e.type === 'collective-begin' && begins.push(e));
    const fused = await Promise.all(
      comms.map((c, r) => allreduceFused(c, tensors[r], { op: 'average', thresholdBytes: 200, segmentBytes: SEG })),
    );
    expect(begins.length).toBe(planFusion(tensors[0], 200).length);
    expect(begins.length).toBeLessThan(shapes.length);
    for (let k = 0; k < shapes.length; k++) {
      const single = await Promise.all(
        comms.map((c, r) => allreduce(c, tensors[r][k].data, { op: 'average', name: `layer${k}` })),
      );
      // Equal up to summation order (an element's chunk, hence its ring order, differs between the two).
      for (let r = 0; r < size; r++) {
        expect(fused[r][k].length).toBe(single[r].length);
        fused[r][k].forEach((v, i) => expect(v).toBeCloseTo(single[r][i], 6));
      }
    }
    comms.forEach((c) => c.close());
  });
});

describe('overlapping collectives', () => {
  it('run side by side on one communicator when every rank starts them in the same order', async () => {
    const comms = createMemoryRing(3);
    const out = await Promise.all(
      comms.map((c, r) =>
        Promise.all([
          allreduce(c, new Int32Array(50).fill(r), { name: 'a', segmentBytes: SEG }),
          allgather(c, Int32Array.of(r), { name: 'b' }),
          allreduce(c, new Int32Array(7).fill(1), { name: 'c', op: 'product' }),
        ]),
      ),
    );
    for (const [a, b, c] of out) {
      expect(Array.from(a)).toEqual(new Array(50).fill(3));
      expect(Array.from(b)).toEqual([0, 1, 2]);
      expect(Array.from(c)).toEqual(new Array(7).fill(1));
    }
    comms.forEach((c) => c.close());
  });
});

describe('events', () => {
  it('reports phases and every chunk with values when the bus asks for them (teaching mode)', async () => {
    const bus = new EventBus({ withValues: true });
    const comms = createMemoryRing(3, { events: bus });
    const events: RingEvent[] = [];
    bus.on((e) => e.rank === 1 && events.push(e));
    await Promise.all(
      comms.map((c, r) => allreduce(c, Float32Array.from([r, r, r, r, r, r]), { name: 'teach', algorithm: 'ring' })),
    );
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('collective-begin');
    expect(types.at(-1)).toBe('collective-end');
    const phases = events.filter((e) => e.type === 'phase-begin').map((e) => (e as { phase: string }).phase);
    expect(phases).toEqual(['negotiate', 'reduce-scatter', 'allgather']);
    const recvs = events.filter((e) => e.type === 'chunk-recv');
    expect(recvs.length).toBe(4); // (size-1) steps in each of two phases, one segment each
    for (const e of recvs) expect((e as { values?: number[] }).values?.length).toBe(2);
    const last = recvs.at(-1) as { result?: number[] };
    expect(last.result).toEqual([3, 3]);
    comms.forEach((c) => c.close());
  });
});
