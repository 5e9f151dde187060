/**
 * The response cache's fast path (src/collectives/run.ts): a collective every
 * rank agreed on before moves its data at once, the agreement's fingerprint
 * riding on the first message to each peer. What must still hold: nothing
 * but data on the wire, a rank that misses or disagrees sends everyone back
 * to the coordinator within the same call, in-place buffers come back
 * untouched when the fast path is abandoned, and nothing is left over.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { cacheOf } from '../../src/collectives/cache.ts';
import { allgather, allreduce, allreduceInPlace, alltoall, reducescatter } from '../../src/collectives/index.ts';
import type { RingEvent } from '../../src/core/events.ts';
import type { RingtrainError } from '../../src/core/errors.ts';

const phasesOf = (comm: Communicator) => {
  const phases: string[] = [];
  comm.events.on((e: RingEvent) => e.type === 'phase-begin' && phases.push(e.phase));
  return phases;
};
const negotiations = (phases: string[]) => phases.filter((p) => p === 'negotiate').length;

describe('the response cache goes ahead without negotiating', () => {
  it('a repeated allreduce, allgather, alltoall and reducescatter negotiate once, then never', async () => {
    const comms = createMemoryRing(4);
    const phases = comms.map(phasesOf);
    for (let i = 0; i < 4; i++) {
      const sums = await Promise.all(comms.map((c, r) => allreduce(c, Float32Array.from({ length: 1000 }, (_, k) => r + k + i), { name: 'grad' })));
      for (const s of sums) expect(s[7]).toBe(6 + 4 * (7 + i));
      const small = await Promise.all(comms.map((c, r) => allreduce(c, Float32Array.of(r), { name: 'small' })));
      for (const s of small) expect(Array.from(s)).toEqual([6]);
      const gathered = await Promise.all(comms.map((c, r) => allgather(c, Float32Array.from({ length: r + 1 }, () => r), { name: 'rows' })));
      for (const g of gathered) expect(Array.from(g)).toEqual([0, 1, 1, 2, 2, 2, 3, 3, 3, 3]);
      const a2a = await Promise.all(comms.map((c, r) => alltoall(c, Int32Array.from({ length: 4 }, (_, j) => 10 * r + j), { name: 'a2a' })));
      a2a.forEach((x, r) => expect(Array.from(x.data)).toEqual([r, 10 + r, 20 + r, 30 + r]));
      const rs = await Promise.all(comms.map((c) => reducescatter(c, Float32Array.of(1, 2, 3, 4), { name: 'rs' })));
      rs.forEach((x, r) => expect(Array.from(x)).toEqual([4 * (r + 1)]));
    }
    // Five collectives: negotiated on the first round only.
    for (const p of phases) expect(negotiations(p)).toBe(5);
    comms.forEach((c) => c.close());
  });

  it('two ranks that went ahead on different cached agreements fail alike, naming both, and the ring goes on', async () => {
    const comms = createMemoryRing(4);
    const x = (c: Communicator, name: string) => allreduce(c, Float32Array.from({ length: 64 }, () => 1), { name });
    await Promise.all(comms.map((c) => x(c, 'a')));
    await Promise.all(comms.map((c) => x(c, 'b')));
    // Both are cached everywhere; rank 2 now calls 'b' where the others call 'a'.
    const out = await Promise.allSettled(comms.map((c, r) => x(c, r === 2 ? 'b' : 'a')));
    for (const s of out) {
      expect(s.status).toBe('rejected');
      const e = (s as PromiseRejectedResult).reason as RingtrainError;
      expect(e.code).toBe('ERR_COLLECTIVE_MISMATCH');
      expect(e.message).toContain("ranks 0,1,3 sent allreduce 'a' float32[64]");
      expect(e.message).toContain("rank 2 sent allreduce 'b' float32[64]");
    }
    const again = await Promise.all(comms.map((c) => x(c, 'a')));
    for (const a of again) expect(a[0]).toBe(4);
    comms.forEach((c) => c.close());
  });

  it('a rank that lost its cache entry brings the others back: in-place buffers are restored and the sum is exact', async () => {
    const comms = createMemoryRing(4);
    const phases = comms.map(phasesOf);
    const n = 50_000; // many 256-byte segments: the others reduce some before they hear of the miss
    const fill = (r: number, i: number) => Float32Array.from({ length: n }, (_, k) => (r + 1) * (k % 97) + i);
    const opts = { name: 'flat', segmentBytes: 256 };
    const run = async (i: number) => {
      const bufs = comms.map((_, r) => fill(r, i));
      await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs[r], opts)));
      for (const b of bufs) for (const k of [0, 1, 96, 12_345, n - 1]) expect(b[k]).toBe(10 * (k % 97) + 4 * i);
    };
    await run(0);
    await run(1);
    const req = { kind: 'allreduce', name: 'flat', dtype: 'float32', shape: [n], op: 'sum', compression: 'none', prescale: 1, postscale: 1, algorithm: 'ring' };
    cacheOf(comms[2]).delete(req);
    await run(2);
    expect(phases.map(negotiations)).toEqual([2, 2, 2, 2]);
    await run(3);
    expect(phases.map(negotiations)).toEqual([2, 2, 2, 2]);
    comms.forEach((c) => c.close());
  });

  it('a rank whose allgather block changed size is a miss, not an error: everyone negotiates and gets the new layout', async () => {
    const comms = createMemoryRing(3);
    const phases = comms.map(phasesOf);
    const call = (rows: (r: number) => number) => Promise.all(comms.map((c, r) => allgather(c, Float32Array.from({ length: rows(r) }, () => r), { name: 'sketches' })));
    await call(() => 2);
    expect(Array.from((await call(() => 2))[0])).toEqual([0, 0, 1, 1, 2, 2]);
    const changed = await call((r) => (r === 1 ? 3 : 2));
    for (const g of changed) expect(Array.from(g)).toEqual([0, 0, 1, 1, 1, 2, 2]);
    expect(phases.map(negotiations)).toEqual([2, 2, 2]);
    for (const g of await call((r) => (r === 1 ? 3 : 2))) expect(Array.from(g)).toEqual([0, 0, 1, 1, 1, 2, 2]);
    expect(phases.map(negotiations)).toEqual([2, 2, 2]);
    comms.forEach((c) => c.close());
  });

  it('a changed op on one rank of a cached in-place allreduce fails on every rank and leaves every buffer as it was', async () => {
    const comms = createMemoryRing(3);
    const make = () => comms.map((_, r) => Float32Array.from({ length: 3000 }, (_, k) => r + k));
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, make()[r], { name: 'g', segmentBytes: 512 })));
    const bufs = make();
    const out = await Promise.allSettled(comms.map((c, r) => allreduceInPlace(c, bufs[r], { name: 'g', segmentBytes: 512, op: r === 1 ? 'max' : 'sum' })));
    for (const s of out) expect(((s as PromiseRejectedResult).reason as RingtrainError).code).toBe('ERR_COLLECTIVE_MISMATCH');
    const fresh = make();
    bufs.forEach((b, r) => expect(Array.from(b)).toEqual(Array.from(fresh[r])));
    comms.forEach((c) => c.close());
  });
});
