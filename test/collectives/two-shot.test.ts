/**
 * Two-shot allreduce (src/collectives/two-shot.ts) over the memory transport,
 * beyond the grid (grid.test.ts runs it through every size, count, op and
 * dtype): who it talks to and how much it sends (the reason it exists),
 * prescale and postscale, fp16's bits, empty blocks, the response cache's
 * fast path, and where 'auto' picks it. The same algorithm over real WebRTC:
 * test/comm/ring-peer.ts's 'check' scenario.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import {
  allreduce,
  autoAlgorithm,
  chooseAlgorithm,
  MAX_TWO_SHOT_RANKS,
  reduceSettings,
} from '../../src/collectives/allreduce.ts';
import { splitEven } from '../../src/collectives/codecs/partition.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../../src/collectives/codecs/types.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { expectCachedFallback } from './cached-fallback.ts';
import { expectScaledResults } from './scaled-results.ts';

type Send = Extract<RingEvent, { type: 'chunk-send' }>;

function sendsOf(comm: Communicator): Send[] {
  const out: Send[] = [];
  comm.events.on((e: RingEvent) => e.type === 'chunk-send' && e.phase === 'two-shot' && out.push(e));
  return out;
}

describe('two-shot on the wire', () => {
  for (const size of [2, 3, 5, 8]) {
    it(`${size} ranks: block j to rank j, then its own reduced block to everyone; 2 rounds, 2(N-1)/N of the tensor sent per rank`, async () => {
      const comms = createMemoryRing(size);
      const sends = comms.map(sendsOf);
      const count = 10_007; // odd: the blocks differ by one element
      const out = await Promise.all(
        comms.map((c, r) =>
          allreduce(
            c,
            Float32Array.from({ length: count }, (_, k) => r + k),
            { algorithm: 'two-shot' },
          ),
        ),
      );
      for (const o of out)
        expect([o[0], o[count - 1]]).toEqual([(size * (size - 1)) / 2, (size * (size - 1)) / 2 + size * (count - 1)]);
      const blocks = splitEven(count, size);
      sends.forEach((s, r) => {
        const others = Array.from({ length: size - 1 }, (_, d) => (r + 1 + d) % size);
        // One segment per message at the default segment size: shot one, then shot two.
        expect(
          s.map((e) => [e.step, e.to, e.chunk]),
          `rank ${r}`,
        ).toEqual([...others.map((j) => [1, j, j]), ...others.map((j) => [2, j, r])]);
        expect(s.filter((e) => e.step === 1).map((e) => e.count)).toEqual(others.map((j) => blocks[j].count));
        const sent = s.reduce((a, e) => a + e.count, 0);
        expect(sent, `rank ${r}`).toBe(count - blocks[r].count + (size - 1) * blocks[r].count);
        expect(sent / count).toBeCloseTo((2 * (size - 1)) / size, 2);
      });
      comms.forEach((c) => c.close());
    });
  }

  it('a tensor shorter than the ranks still sends one (empty) message per pair and shot, and sums right', async () => {
    for (const size of [3, 5, 7]) {
      const comms = createMemoryRing(size);
      const sends = comms.map(sendsOf);
      const out = await Promise.all(
        comms.map((c, r) => allreduce(c, Float32Array.of(r + 0.5, -r), { algorithm: 'two-shot' })),
      );
      for (const o of out) expect(Array.from(o)).toEqual([(size * size) / 2, (-size * (size - 1)) / 2]);
      sends.forEach((s, r) => expect(s.length, `size ${size} rank ${r}`).toBe(2 * (size - 1)));
      expect(sends.flat().some((e) => e.count === 0)).toBe(true);
      comms.forEach((c) => c.close());
    }
  });

  it('ranks whose tensors differ in length are refused on every rank, naming them, and nothing is summed', async () => {
    const comms = createMemoryRing(3);
    const inputs = comms.map((_, r) => new Float32Array(r === 2 ? 301 : 300).fill(1));
    const results = await Promise.allSettled(
      comms.map((c, r) => allreduce(c, inputs[r], { algorithm: 'two-shot', timeoutMs: 2000 })),
    );
    for (const x of results)
      expect(x.status === 'rejected' && (x.reason as Error).message).toMatch(
        /rank 2 sent allreduce 'allreduce' float32\[301\]/,
      );
    for (const t of inputs) expect(t.every((v) => v === 1)).toBe(true);
    comms.forEach((c) => c.close());
  });
});

describe('two-shot results', () => {
  for (const size of [2, 3, 6, 7]) {
    it(`${size} ranks: prescale and postscale, sum and average, float32, int32, float16 and fp16 on the wire`, async () => {
      for (const kind of ['float32', 'int32', 'float16', 'fp16'] as const) {
        for (const op of ['sum', 'average'] as const)
          await expectScaledResults('two-shot', size, kind, op, 301, 0.5, 3);
      }
    });
  }

  it('fp16 on the wire: every rank the same bits, each block rounded once by its owner', async () => {
    const comms = createMemoryRing(3);
    // 1 + 2^-11 is not a float16: sent as 1, an owner that kept its own float32 would differ from the others.
    const out = await Promise.all(
      comms.map((c, r) =>
        allreduce(
          c,
          Float32Array.from({ length: 3 }, (_, k) => (k === r ? 1 + 2 ** -11 : 0)),
          { algorithm: 'two-shot', compression: 'fp16' },
        ),
      ),
    );
    for (const o of out) expect(Array.from(o)).toEqual([1, 1, 1]);
    comms.forEach((c) => c.close());
  });

  it('refuses int8, top-k and error feedback, which run on the ring only', async () => {
    const [c] = createMemoryRing(1);
    for (const o of [
      { compression: 'int8' as const },
      { compression: 'topk:0.5' as const },
      { compression: 'fp16' as const, errorFeedback: new Float32Array(4) },
    ]) {
      await expect(allreduce(c, new Float32Array(4), { ...o, algorithm: 'two-shot' })).rejects.toMatchObject({
        code: ErrorCode.InvalidArgument,
        message: expect.stringContaining('run on the ring only'),
      });
    }
    c.close();
  });
});

describe("two-shot in 'auto' and the cache", () => {
  it("'auto': middle sizes on 3, 5, 6 and 7 ranks (no fold needed); powers of two keep halving-doubling; 2 ranks and more than MAX_TWO_SHOT_RANKS the ring", () => {
    const middle = (DEFAULT_SMALL_BYTES + DEFAULT_MEDIUM_BYTES) / 2;
    for (const size of [3, 5, 6, 7])
      expect(autoAlgorithm(middle, size, DEFAULT_SMALL_BYTES), `size ${size}`).toBe('two-shot');
    for (const size of [4, 8, 16])
      expect(autoAlgorithm(middle, size, DEFAULT_SMALL_BYTES), `size ${size}`).toBe('halving-doubling');
    expect(autoAlgorithm(middle, 2, DEFAULT_SMALL_BYTES)).toBe('ring');
    expect(autoAlgorithm(middle, MAX_TWO_SHOT_RANKS + 1, DEFAULT_SMALL_BYTES)).toBe('ring');
    expect(autoAlgorithm(DEFAULT_SMALL_BYTES, 3, DEFAULT_SMALL_BYTES)).toBe('recursive-doubling');
    expect(autoAlgorithm(DEFAULT_MEDIUM_BYTES + 4, 3, DEFAULT_SMALL_BYTES)).toBe('ring');
    const t = new Float32Array(2048);
    const at = (o: object) =>
      chooseAlgorithm(reduceSettings(t, { smallBytes: 1024, mediumBytes: 16384, ...o }, 'test'), t.byteLength, 3);
    expect(at({})).toBe('two-shot');
    expect(at({ compression: 'fp16' })).toBe('two-shot');
    // Observed reductions (verified.ts) follow the ring's path.
    expect(at({ observeReceived: () => {} })).toBe('ring');
  });

  it('a cached allreduce goes ahead without the coordinator; a rank that missed brings the others back, buffers as they were', async () => {
    await expectCachedFallback('two-shot', 3, 1);
  });
});
