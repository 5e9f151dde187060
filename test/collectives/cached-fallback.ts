/**
 * The response cache's fast path for an allreduce algorithm that changes the buffer from its
 * first step (halving-doubling, two-shot): a cached call negotiates nothing; when one rank has
 * forgotten the agreement, the others go ahead, hear of it, put their buffers back as they were
 * and negotiate, and every rank still ends with the right sum.
 */
import { expect } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { cacheOf } from '../../src/collectives/controller/cache.ts';
import type { Algorithm, Tensor } from '../../src/collectives/codecs/types.ts';
import type { RingEvent } from '../../src/core/events.ts';

const bytesOf = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);

export async function expectCachedFallback(
  algorithm: Exclude<Algorithm, 'auto'>,
  size: number,
  forgetful: number,
): Promise<void> {
  const comms = createMemoryRing(size);
  const phases = comms.map((c) => {
    const p: string[] = [];
    c.events.on((e: RingEvent) => e.type === 'phase-begin' && p.push(e.phase));
    return p;
  });
  const n = 3001;
  const make = (i: number) =>
    comms.map((_, r) => Float32Array.from({ length: n }, (_, k) => Math.sin(r * 31 + k + i) * 100));
  const opts = { name: 'g', segmentBytes: 256, algorithm };
  const expected = make(1);
  await Promise.all(comms.map((c, r) => allreduceInPlace(c, expected[r], { ...opts, name: 'reference' })));
  await Promise.all(comms.map((c, r) => allreduceInPlace(c, make(0)[r], opts)));
  const negotiated = () => phases.map((p) => p.filter((x) => x === 'negotiate').length);
  expect(negotiated()).toEqual(comms.map(() => 2));
  const again = make(1);
  await Promise.all(comms.map((c, r) => allreduceInPlace(c, again[r], opts)));
  expect(negotiated()).toEqual(comms.map(() => 2));
  again.forEach((b, r) => expect(bytesOf(b), `rank ${r}`).toEqual(bytesOf(expected[r])));
  // One rank forgets the agreement; the others go ahead, reduce some segments, then hear of it.
  cacheOf(comms[forgetful]).delete({
    kind: 'allreduce',
    name: 'g',
    dtype: 'float32',
    shape: [n],
    op: 'sum',
    compression: 'none',
    prescale: 1,
    postscale: 1,
    algorithm,
  });
  const seen: Float32Array[] = [];
  const bufs = make(1);
  comms.forEach((c) =>
    c.events.on(
      (e: RingEvent) => e.type === 'phase-begin' && e.phase === 'negotiate' && seen.push(bufs[c.rank].slice()),
    ),
  );
  await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs[r], opts)));
  expect(negotiated()).toEqual(comms.map(() => 3));
  // Each buffer was back to its own numbers when its rank negotiated.
  const fresh = make(1);
  expect(seen.length).toBe(size);
  seen.forEach((x) => expect(fresh.some((f) => Buffer.compare(bytesOf(f), bytesOf(x)) === 0)).toBe(true));
  bufs.forEach((b, r) => expect(bytesOf(b), `rank ${r}`).toEqual(bytesOf(expected[r])));
  comms.forEach((c) => c.close());
}
