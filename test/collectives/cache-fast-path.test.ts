/**
 * The response cache's fast path (src/collectives/controller/run.ts): a collective every
 * rank agreed on before moves its data at once, the agreement's fingerprint
 * riding on the first message to each peer. What must still hold: nothing
 * but data on the wire, a rank that misses or disagrees sends everyone back
 * to the coordinator within the same call, in-place buffers come back
 * untouched when the fast path is abandoned, and nothing is left over.
 */
import { describe, expect, it, vi } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { cacheOf } from '../../src/collectives/controller/cache.ts';
import { allgather, allreduce, allreduceInPlace, alltoall, reducescatter } from '../../src/collectives/index.ts';
import type { RingEvent } from '../../src/core/events.ts';
import type { RingtrainError } from '../../src/core/errors.ts';
import { PHASE_ALLGATHER } from '../../src/collectives/transfer/ring.ts';
import { FAST_STEP_BIT } from '../../src/collectives/controller/negotiate.ts';
import type { ReduceOp } from '../../src/collectives/codecs/types.ts';
import { interceptSends } from '../support/intercept-sends.ts';

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
      const sums = await Promise.all(
        comms.map((c, r) =>
          allreduce(
            c,
            Float32Array.from({ length: 1000 }, (_, k) => r + k + i),
            { name: 'grad' },
          ),
        ),
      );
      for (const s of sums) expect(s[7]).toBe(6 + 4 * (7 + i));
      const small = await Promise.all(comms.map((c, r) => allreduce(c, Float32Array.of(r), { name: 'small' })));
      for (const s of small) expect(Array.from(s)).toEqual([6]);
      const gathered = await Promise.all(
        comms.map((c, r) =>
          allgather(
            c,
            Float32Array.from({ length: r + 1 }, () => r),
            { name: 'rows' },
          ),
        ),
      );
      for (const g of gathered) expect(Array.from(g)).toEqual([0, 1, 1, 2, 2, 2, 3, 3, 3, 3]);
      const a2a = await Promise.all(
        comms.map((c, r) =>
          alltoall(
            c,
            Int32Array.from({ length: 4 }, (_, j) => 10 * r + j),
            { name: 'a2a' },
          ),
        ),
      );
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
    const x = (c: Communicator, name: string) =>
      allreduce(
        c,
        Float32Array.from({ length: 64 }, () => 1),
        { name },
      );
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
    const req = {
      kind: 'allreduce',
      name: 'flat',
      dtype: 'float32',
      shape: [n],
      op: 'sum',
      compression: 'none',
      prescale: 1,
      postscale: 1,
      algorithm: 'ring',
    };
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
    const call = (rows: (r: number) => number) =>
      Promise.all(
        comms.map((c, r) =>
          allgather(
            c,
            Float32Array.from({ length: rows(r) }, () => r),
            { name: 'sketches' },
          ),
        ),
      );
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
    const out = await Promise.allSettled(
      comms.map((c, r) => allreduceInPlace(c, bufs[r], { name: 'g', segmentBytes: 512, op: r === 1 ? 'max' : 'sum' })),
    );
    for (const s of out)
      expect(((s as PromiseRejectedResult).reason as RingtrainError).code).toBe('ERR_COLLECTIVE_MISMATCH');
    const fresh = make();
    bufs.forEach((b, r) => expect(Array.from(b)).toEqual(Array.from(fresh[r])));
    comms.forEach((c) => c.close());
  });
});

describe('in place on the ring, the fast path keeps no copy of the buffer', () => {
  const copiesOf = (n: number, f: () => Promise<unknown>) => {
    // Counts copies as long as the buffer (the snapshot a fallback would restore from).
    let copies = 0;
    const slice = Float32Array.prototype.slice;
    const spy = vi.spyOn(Float32Array.prototype, 'slice').mockImplementation(function (
      this: Float32Array,
      ...a: [number?, number?]
    ) {
      if (this.length === n) copies++;
      return slice.apply(this, a);
    });
    return f().then(
      (r) => (spy.mockRestore(), { copies, r }),
      (e: unknown) => (spy.mockRestore(), Promise.reject(e)),
    );
  };

  it('a cached allreduceInPlace on the ring copies nothing; recursive doubling (small tensors) and halving-doubling (middle sizes) still snapshot', async () => {
    const comms = createMemoryRing(4);
    const n = 40_000;
    const bufs = () => comms.map((_, r) => Float32Array.from({ length: n }, (_, k) => r + (k % 13)));
    // 160 KB on 4 ranks: 'auto' would take halving-doubling; the ring is forced here, and 'auto' is the last call.
    const ring = { name: 'flat', segmentBytes: 4096, algorithm: 'ring' as const };
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs()[r], ring)));
    const b = bufs();
    const { copies } = await copiesOf(n, () => Promise.all(comms.map((c, r) => allreduceInPlace(c, b[r], ring))));
    expect(copies).toBe(0);
    for (const x of b) expect([x[0], x[5], x[n - 1]]).toEqual([6, 4 * 5 + 6, 4 * ((n - 1) % 13) + 6]);
    const small = () => comms.map((_, r) => Float32Array.from({ length: 100 }, () => r));
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, small()[r], { name: 'small' })));
    const s = small();
    expect(
      (await copiesOf(100, () => Promise.all(comms.map((c, r) => allreduceInPlace(c, s[r], { name: 'small' })))))
        .copies,
    ).toBe(4);
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs()[r], { name: 'middle' })));
    const m = bufs();
    expect(
      (await copiesOf(n, () => Promise.all(comms.map((c, r) => allreduceInPlace(c, m[r], { name: 'middle' }))))).copies,
    ).toBe(4);
    for (const x of m) expect([x[0], x[5], x[n - 1]]).toEqual([6, 4 * 5 + 6, 4 * ((n - 1) % 13) + 6]);
    comms.forEach((c) => c.close());
  });

  for (const size of [3, 4, 5]) {
    for (const [op, dtype] of [
      ['sum', 'float32'],
      ['max', 'float32'],
      ['min', 'int32'],
      ['product', 'int32'],
      ['average', 'fp16'],
    ] as const) {
      it(`${size} ranks, ${op} ${dtype}: a rank that missed its cache brings the others back, whose buffers hold exactly their own numbers again`, async () => {
        const comms = createMemoryRing(size);
        const n = 6000;
        const value = (r: number, k: number, i: number) =>
          dtype === 'int32' ? ((r + 2) * (k % 5) + i) % 7 : Math.sin(r * 31 + k + i) * 100;
        const make = (i: number) =>
          comms.map((_, r) =>
            dtype === 'int32'
              ? Int32Array.from({ length: n }, (_, k) => value(r, k, i))
              : Float32Array.from({ length: n }, (_, k) => value(r, k, i)),
          );
        const opts = {
          name: 'g',
          op: op as ReduceOp,
          segmentBytes: 256,
          algorithm: 'ring' as const,
          compression: dtype === 'fp16' ? ('fp16' as const) : ('none' as const),
        };
        // The numbers a negotiated allreduce gives, for comparison.
        const expected = make(1);
        await Promise.all(comms.map((c, r) => allreduceInPlace(c, expected[r], { ...opts, name: 'reference' })));
        await Promise.all(comms.map((c, r) => allreduceInPlace(c, make(0)[r], opts)));
        const bufs = make(1);
        const seen: (Int32Array | Float32Array)[] = [];
        // Rank 1 forgets its agreement late, after its neighbours have sent (and reduced) some data.
        const miss = comms[1];
        const req = {
          kind: 'allreduce',
          name: 'g',
          dtype: dtype === 'int32' ? 'int32' : 'float32',
          shape: [n],
          op,
          compression: opts.compression,
          prescale: 1,
          postscale: 1,
          algorithm: 'ring',
        };
        cacheOf(miss).delete(req);
        comms.forEach((c) =>
          c.events.on(
            (e: RingEvent) => e.type === 'phase-begin' && e.phase === 'negotiate' && seen.push(bufs[c.rank].slice()),
          ),
        );
        await Promise.all(comms.map((c, r) => allreduceInPlace(c, bufs[r], opts)));
        // When each rank went to negotiate, its buffer held exactly what it was called with.
        const fresh = make(1);
        expect(seen.length).toBe(size);
        for (const x of seen) expect(fresh.some((f) => f.every((v, k) => Object.is(v, x[k])))).toBe(true);
        bufs.forEach((b, r) => expect(Array.from(b), `rank ${r}`).toEqual(Array.from(expected[r])));
        comms.forEach((c) => c.close());
      });
    }
  }

  it('a peer silent after every rank went ahead fails every rank with Timeout, as on the negotiated path', async () => {
    const comms = createMemoryRing(3);
    const opts = { name: 'g', segmentBytes: 1024, timeoutMs: 400, algorithm: 'ring' as const };
    const make = () => comms.map((_, r) => Float32Array.from({ length: 3000 }, (_, k) => r + k));
    await Promise.all(comms.map((c, r) => allreduceInPlace(c, make()[r], opts)));
    // Rank 1 stops passing on the allgather's data to rank 2: every rank has gone ahead by then.
    interceptSends(
      comms[1],
      (send) => (peer, tag, payload) =>
        (tag.step & FAST_STEP_BIT) !== 0 && (tag.step & ~FAST_STEP_BIT) >>> 16 === PHASE_ALLGATHER && peer === 2
          ? Promise.resolve()
          : send(peer, tag, payload),
    );
    const out = await Promise.allSettled(comms.map((c, r) => allreduceInPlace(c, make()[r], opts)));
    // Ranks 0 and 1 had every byte they needed and may have finished; rank 2 cannot negotiate again
    // (its buffer holds partial results), so it fails and aborts the communicator.
    expect(out[2].status).toBe('rejected');
    const err = (out[2] as PromiseRejectedResult).reason as RingtrainError;
    expect(err.code).toBe('ERR_COLLECTIVE_TIMEOUT');
    expect(err.message).toMatch(/rank 1 sent nothing, after every rank had gone ahead/);
    for (const o of out)
      if (o.status === 'rejected') expect((o.reason as RingtrainError).code).toBe('ERR_COLLECTIVE_TIMEOUT');
    // Every rank fails alike: the abort reaches the others, whose next collective fails with it.
    const next = await Promise.allSettled(comms.map((c, r) => allreduceInPlace(c, make()[r], opts)));
    for (const [r, o] of next.entries())
      expect(o.status === 'rejected' && (o.reason as RingtrainError).code, `rank ${r}`).toBe('ERR_COLLECTIVE_TIMEOUT');
    comms.forEach((c) => c.close());
  });
});
