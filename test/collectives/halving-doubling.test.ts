/**
 * Recursive halving-doubling (src/collectives/halving-doubling.ts) over the
 * memory transport, beyond the grid (grid.test.ts runs it through every
 * size, count, op and dtype): who it talks to and how much it sends (the
 * reason it exists), prescale and postscale, the lossy codecs it refuses, the
 * response cache's fast path, and where 'auto' picks it. The same algorithm
 * over real WebRTC: test/comm/ring-peer.ts's 'check' scenario.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, autoAlgorithm, chooseAlgorithm, reduceSettings } from '../../src/collectives/allreduce.ts';
import { float16ToFloat32 } from '../../src/collectives/codecs/fp16.ts';
import { splitEven } from '../../src/collectives/codecs/partition.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES, type Tensor } from '../../src/collectives/codecs/types.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { expectCachedFallback } from './cached-fallback.ts';
import { expectScaledResults } from './scaled-results.ts';

type Send = Extract<RingEvent, { type: 'chunk-send' }>;

function sendsOf(comm: Communicator): Send[] {
  const out: Send[] = [];
  comm.events.on((e: RingEvent) => e.type === 'chunk-send' && e.phase === 'halving-doubling' && out.push(e));
  return out;
}

const bytesOf = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);

describe('halving-doubling on the wire', () => {
  for (const size of [2, 4, 8]) {
    it(`${size} ranks: halves with the partner at distance N/2, N/4, ... then back; 2(N-1)/N of the tensor sent per rank`, async () => {
      const comms = createMemoryRing(size);
      const sends = comms.map(sendsOf);
      const count = 10_007; // odd: the blocks differ by one element
      const out = await Promise.all(
        comms.map((c, r) =>
          allreduce(
            c,
            Float32Array.from({ length: count }, (_, k) => r + k),
            { algorithm: 'halving-doubling' },
          ),
        ),
      );
      for (const o of out)
        expect([o[0], o[count - 1]]).toEqual([(size * (size - 1)) / 2, (size * (size - 1)) / 2 + size * (count - 1)]);
      const rounds = Math.log2(size);
      const distances = [
        ...Array.from({ length: rounds }, (_, k) => size >> (k + 1)),
        ...Array.from({ length: rounds }, (_, k) => 1 << k),
      ];
      const blocks = splitEven(count, size);
      sends.forEach((s, r) => {
        // One segment per exchange at the default segment size.
        expect(
          s.map((e) => e.to),
          `rank ${r}`,
        ).toEqual(distances.map((d) => r ^ d));
        const sent = s.reduce((a, e) => a + e.count, 0);
        // Reduce-scatter gives away all but its own block; allgather hands out what it holds: its own
        // block, then the aligned pair of blocks around it, then four, ... up to half the tensor.
        let gathered = 0;
        for (let held = 1; held < size; held *= 2) {
          const first = r - (r % held);
          gathered += blocks.slice(first, first + held).reduce((a, b) => a + b.count, 0);
        }
        expect(sent, `rank ${r}`).toBe(count - blocks[r].count + gathered);
        expect(sent / count).toBeCloseTo((2 * (size - 1)) / size, 2);
      });
      comms.forEach((c) => c.close());
    });
  }

  it('6 ranks: ranks 0 and 2 hand their tensor to 1 and 3 and get the result back; 1..5 halve and double among four', async () => {
    const comms = createMemoryRing(6);
    const sends = comms.map(sendsOf);
    const count = 999;
    const out = await Promise.all(
      comms.map((c, r) =>
        allreduce(
          c,
          Int32Array.from({ length: count }, (_, k) => (r + 1) * k),
          { algorithm: 'halving-doubling', segmentBytes: 400 },
        ),
      ),
    );
    for (const o of out) expect(bytesOf(o)).toEqual(bytesOf(out[0]));
    expect(Array.from(out[0].subarray(0, 3))).toEqual([0, 21, 42]);
    const peers = (r: number) => [...new Set(sends[r].map((e) => e.to))].sort();
    expect(peers(0)).toEqual([1]);
    expect(peers(2)).toEqual([3]);
    expect(sends[0].reduce((a, e) => a + e.count, 0)).toBe(count);
    // Renumbered 0..3 are ranks 1, 3, 4, 5; ranks 1 and 3 also fold out.
    expect(peers(1)).toEqual([0, 3, 4]);
    expect(peers(4)).toEqual([1, 5]);
    // 400-byte segments: 100 int32 each, so the fold carries ten messages.
    expect(sends[0].length).toBe(10);
    comms.forEach((c) => c.close());
  });

  it('a tensor shorter than the ranks still sends one (empty) message per exchange and sums right', async () => {
    for (const size of [3, 4, 5, 8]) {
      const comms = createMemoryRing(size);
      const sends = comms.map(sendsOf);
      const out = await Promise.all(
        comms.map((c, r) => allreduce(c, Float32Array.of(r + 0.5, -r), { algorithm: 'halving-doubling' })),
      );
      for (const o of out) expect(Array.from(o)).toEqual([(size * size) / 2, (-size * (size - 1)) / 2]);
      let p = 1;
      while (p * 2 <= size) p *= 2;
      const exchanges = (r: number) =>
        r < 2 * (size - p) && r % 2 === 0 ? 1 : 2 * Math.log2(p) + (r < 2 * (size - p) ? 1 : 0);
      sends.forEach((s, r) => expect(s.length, `size ${size} rank ${r}`).toBe(exchanges(r)));
      if (p > 2) expect(sends.flat().some((e) => e.count === 0)).toBe(true);
      comms.forEach((c) => c.close());
    }
  });
});

describe('halving-doubling results', () => {
  for (const size of [2, 3, 4, 5, 7]) {
    it(`${size} ranks: prescale and postscale, sum and average, float32, int32, float16 and fp16 on the wire`, async () => {
      for (const kind of ['float32', 'int32', 'float16', 'fp16'] as const) {
        for (const op of ['sum', 'average'] as const)
          await expectScaledResults('halving-doubling', size, kind, op, 301, 0.5, 3);
      }
    });
  }

  it('fp16 on the wire: every rank the same bits, and each block rounded once by its owner', async () => {
    const comms = createMemoryRing(4);
    // 1 + 2^-11 is not a float16: sent as 1, a rank that kept its own float32 would differ from the others.
    const out = await Promise.all(
      comms.map((c, r) =>
        allreduce(
          c,
          Float32Array.from({ length: 4 }, (_, k) => (k === r ? 1 + 2 ** -11 : 0)),
          { algorithm: 'halving-doubling', compression: 'fp16' },
        ),
      ),
    );
    for (const o of out) expect(Array.from(o)).toEqual([1, 1, 1, 1]);
    comms.forEach((c) => c.close());
  });

  it('float16 tensors sum in float32 and round back, as the ring does', async () => {
    const comms = createMemoryRing(3);
    // 1 + 2^-10 three times is 3 + 3·2^-10, which float16 (spacing 2^-9 above 2) rounds, once per pair.
    const half = (r: number) => Uint16Array.of(0x3c00, 0x3c01, r === 0 ? 0x7c00 : 0x3c00);
    const hd = await Promise.all(comms.map((c, r) => allreduce(c, half(r), { algorithm: 'halving-doubling' })));
    const ring = await Promise.all(comms.map((c, r) => allreduce(c, half(r), { algorithm: 'ring' })));
    for (const o of hd) expect(bytesOf(o)).toEqual(bytesOf(hd[0]));
    expect(Array.from(float16ToFloat32(hd[0]))).toEqual(Array.from(float16ToFloat32(ring[0])));
    expect(float16ToFloat32(hd[0])[0]).toBe(3);
    expect(float16ToFloat32(hd[0])[2]).toBe(Infinity);
    comms.forEach((c) => c.close());
  });
});

describe('halving-doubling and its neighbours', () => {
  it('refuses int8, top-k and error feedback, which run on the ring only', async () => {
    const [c] = createMemoryRing(1);
    for (const o of [
      { compression: 'int8' as const },
      { compression: 'topk:0.5' as const },
      { compression: 'fp16' as const, errorFeedback: new Float32Array(4) },
    ]) {
      await expect(allreduce(c, new Float32Array(4), { ...o, algorithm: 'halving-doubling' })).rejects.toMatchObject({
        code: ErrorCode.InvalidArgument,
        message: expect.stringContaining('run on the ring only'),
      });
    }
    c.close();
  });

  it("'auto': recursive doubling up to smallBytes, halving-doubling up to mediumBytes, the ring above; one rank: the ring", () => {
    expect(DEFAULT_SMALL_BYTES).toBeLessThanOrEqual(DEFAULT_MEDIUM_BYTES);
    expect(autoAlgorithm(DEFAULT_SMALL_BYTES, 4, DEFAULT_SMALL_BYTES)).toBe('recursive-doubling');
    expect(autoAlgorithm(DEFAULT_MEDIUM_BYTES + 4, 4, DEFAULT_SMALL_BYTES)).toBe('ring');
    expect(autoAlgorithm(4096, 4, 1024, 8192)).toBe('halving-doubling');
    expect(autoAlgorithm(8192, 4, 1024, 8192)).toBe('halving-doubling');
    expect(autoAlgorithm(8196, 4, 1024, 8192)).toBe('ring');
    expect(autoAlgorithm(4096, 1, 1024, 8192)).toBe('ring');
    const t = new Float32Array(2048);
    const at = (o: object) =>
      chooseAlgorithm(reduceSettings(t, { smallBytes: 1024, mediumBytes: 16384, ...o }, 'test'), t.byteLength, 4);
    expect(at({})).toBe('halving-doubling');
    expect(at({ compression: 'fp16' })).toBe('halving-doubling');
    // Observed reductions (verified.ts) follow the ring's path; int8 and error feedback need the ring too.
    expect(at({ observeReceived: () => {} })).toBe('ring');
    expect(at({ compression: 'int8' })).toBe('ring');
    expect(at({ compression: 'fp16', errorFeedback: new Float32Array(2048) })).toBe('ring');
    expect(() => reduceSettings(t, { mediumBytes: -1 }, 'test')).toThrow(/mediumBytes must be a number >= 0/);
  });

  it('a cached allreduce goes ahead without the coordinator; a rank that missed brings the others back, buffers as they were', async () => {
    await expectCachedFallback('halving-doubling', 5, 3);
  });
});
