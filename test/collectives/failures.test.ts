/**
 * Failures over memory links: every rank must end with the right error, never hang.
 * (The same scenarios run over real WebRTC in separate processes in test/comm/webrtc-ring.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { LinkCommunicator, QUIET_LINK } from '../../src/comm/communicator.ts';
import type { Link } from '../../src/comm/link.ts';
import { memoryMesh } from '../../src/comm/memory-link.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allgather, allreduce, barrier } from '../../src/collectives/index.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { RingtrainError } from '../../src/core/errors.ts';

const settle = <T>(ps: Promise<T>[]) => Promise.allSettled(ps);
const reason = (s: PromiseSettledResult<unknown>) => (s.status === 'rejected' ? (s.reason as RingtrainError) : null);

describe('negotiation', () => {
  it('fails a shape mismatch on every rank, naming who sent what', async () => {
    const comms = createMemoryRing(4);
    const out = await settle(comms.map((c, r) => allreduce(c, new Float32Array(r === 2 ? 9 : 8), { name: 'grad' })));
    for (const s of out) {
      const e = reason(s)!;
      expect(e.code).toBe('ERR_COLLECTIVE_MISMATCH');
      expect(e.message).toContain("ranks 0,1,3 sent allreduce 'grad' float32[8]");
      expect(e.message).toContain("rank 2 sent allreduce 'grad' float32[9]");
    }
    // The ring is still usable afterwards: ids stayed in step.
    const ok = await Promise.all(comms.map((c) => allreduce(c, Float32Array.of(1), { name: 'after' })));
    for (const t of ok) expect(t[0]).toBe(4);
    comms.forEach((c) => c.close());
  });

  it('fails an op or name mismatch too', async () => {
    const comms = createMemoryRing(2);
    const out = await settle([
      allreduce(comms[0], new Int32Array(3), { op: 'max' }),
      allreduce(comms[1], new Int32Array(3), { op: 'min' }),
    ]);
    for (const s of out) expect(reason(s)?.message).toMatch(/rank 0 sent .*op=max; rank 1 sent .*op=min/);
    comms.forEach((c) => c.close());
  });

  it('times out naming the rank that never came, with stall events while waiting', async () => {
    const comms = createMemoryRing(3);
    const stalls: RingEvent[] = [];
    comms[0].events.on((e) => e.type === 'stall' && stalls.push(e));
    // Rank 2 never calls the collective.
    const out = await settle(
      [0, 1].map((r) => allreduce(comms[r], new Float32Array(4), { name: 'late', timeoutMs: 400 })),
    );
    for (const s of out) {
      const e = reason(s)!;
      expect(e.code).toBe('ERR_COLLECTIVE_TIMEOUT');
      expect(e.message).toContain('rank(s) 2 never answered');
      expect(e.detail?.waitingFor).toEqual([2]);
    }
    expect(stalls.length).toBeGreaterThan(0);
    expect((stalls[0] as { waitingFor: number[] }).waitingFor).toEqual([2]);
    // When rank 2 finally arrives it finds the verdict waiting and fails at once instead of hanging.
    await expect(allreduce(comms[2], new Float32Array(4), { name: 'late', timeoutMs: 400 })).rejects.toMatchObject({
      code: 'ERR_COLLECTIVE_TIMEOUT',
    });
    comms.forEach((c) => c.close());
  });

  it('a silent coordinator times out the others, naming rank 0', async () => {
    const comms = createMemoryRing(2);
    const stalls: RingEvent[] = [];
    comms[1].events.on((e) => e.type === 'stall' && stalls.push(e));
    await expect(barrier(comms[1], { timeoutMs: 1000 })).rejects.toMatchObject({
      code: 'ERR_COLLECTIVE_TIMEOUT',
      detail: { waitingFor: [0] },
    });
    // Rank 1 blames rank 0 only once rank 0 is well past its own deadline for answering (1.5 s of the 2 s).
    expect(stalls.length).toBeGreaterThan(0);
    for (const s of stalls) expect(s).toMatchObject({ waitingFor: [0] });
    expect(Math.min(...stalls.map((s) => (s as { waitedMs: number }).waitedMs))).toBeGreaterThan(1500);
    comms.forEach((c) => c.close());
  });

  it('a rank waiting on the coordinator does not blame it while the coordinator waits on someone else', async () => {
    const comms = createMemoryRing(3);
    const stalls: RingEvent[] = [];
    for (const c of comms) c.events.on((e) => e.type === 'stall' && stalls.push(e));
    // Rank 2 never calls: rank 0 names it; rank 1, which waits on rank 0's verdict, names nobody.
    const out = await settle(
      [0, 1].map((r) => allreduce(comms[r], new Float32Array(4), { name: 'late', timeoutMs: 400 })),
    );
    for (const s of out) expect(reason(s)?.detail?.waitingFor).toEqual([2]);
    expect(stalls.some((s) => s.rank === 0)).toBe(true);
    for (const s of stalls) expect(s).toMatchObject({ rank: 0, waitingFor: [2] });
    comms.forEach((c) => c.close());
  });
});

/** A ring whose links we can cut, as if a process died (no goodbye). */
function ringWithLinks(size: number, options = {}) {
  const mesh = memoryMesh(size);
  const comms = mesh.map((links, rank) => new LinkCommunicator(rank, size, links, { peerTimeoutMs: 0, ...options }));
  return { comms, kill: (rank: number) => mesh[rank].forEach((l) => l.close()) };
}

describe('a peer that goes away', () => {
  it('mid-allreduce (ring): every survivor fails with PeerLost naming it', async () => {
    const size = 5;
    const { comms, kill } = ringWithLinks(size);
    let killed = false;
    comms[0].events.on((e) => {
      if (e.type === 'chunk-recv' && !killed) {
        killed = true;
        kill(3);
      }
    });
    const out = await settle(
      comms.map((c) => allreduce(c, new Float32Array(50_000).fill(1), { segmentBytes: 1024, algorithm: 'ring' })),
    );
    expect(killed).toBe(true);
    out.forEach((s, r) => {
      if (r === 3) return;
      const e = reason(s)!;
      expect(e, `rank ${r}`).toBeInstanceOf(RingtrainError);
      expect(e.code).toBe('ERR_PEER_LOST');
      expect(e.detail?.peer).toBe(3);
      expect(e.message).toContain('rank 3 went away');
    });
    // Later calls fail at once with the same error.
    await expect(allreduce(comms[1], new Float32Array(1))).rejects.toMatchObject({ code: 'ERR_PEER_LOST' });
    comms.forEach((c) => c.close());
  });

  it('a peer that goes silent without closing is caught by heartbeats', async () => {
    const size = 3;
    const mesh = memoryMesh(size);
    // Rank 2's outgoing messages vanish: a frozen process, as far as the others can tell.
    let frozen = false;
    const muted = new Map<number, Link>();
    for (const [peer, l] of mesh[2]) {
      muted.set(peer, {
        peer,
        send: (m) => void (frozen || l.send(m)),
        bufferedAmount: () => 0,
        onMessage: (h) => l.onMessage(h),
        onClose: (h) => l.onClose(h),
        close: () => l.close(),
      });
    }
    mesh[2] = muted;
    const comms = mesh.map(
      (links, rank) => new LinkCommunicator(rank, size, links, { heartbeatMs: 30, peerTimeoutMs: 300 }),
    );
    const events: RingEvent[] = [];
    for (const r of [0, 1]) comms[r].events.on((e) => (e.type === 'stall' || e.type === 'peer-lost') && events.push(e));
    frozen = true;
    const out = await settle([0, 1].map((r) => allreduce(comms[r], new Float32Array(10))));
    for (const s of out) {
      expect(reason(s)?.code).toBe('ERR_PEER_LOST');
      expect(reason(s)?.detail?.peer).toBe(2);
    }
    // Half-way to the timeout a survivor warns, once, that rank 2 went quiet; then it is lost. (A survivor may
    // instead hear of the loss from the other first, if its own clock restarted after a late timer.)
    const stalls = events.filter((e) => e.type === 'stall');
    expect(stalls.length).toBeGreaterThanOrEqual(1);
    for (const r of [0, 1]) {
      const mine = events.filter((e) => e.rank === r);
      const warned = mine.filter((e) => e.type === 'stall');
      expect(warned.length).toBeLessThanOrEqual(1);
      for (const w of warned) {
        expect(w).toMatchObject({ name: QUIET_LINK, waitingFor: [2] });
        expect((w as { waitedMs: number }).waitedMs).toBeGreaterThan(150);
        expect(mine.indexOf(w)).toBeLessThan(mine.findIndex((e) => e.type === 'peer-lost' && e.peer === 2));
      }
    }
    comms.forEach((c) => c.close());
  });

  it('a clean close of one rank fails whoever still waits on it', async () => {
    const comms = createMemoryRing(3);
    const pending = settle([0, 1].map((r) => allgather(comms[r], new Int32Array(3))));
    comms[2].close();
    for (const s of await pending) expect(['ERR_PEER_LOST', 'ERR_ABORTED']).toContain(reason(s)?.code);
    comms.forEach((c) => c.close());
  });

  it('close delivers what was queued before it, then fails new operations', async () => {
    const comms = createMemoryRing(2);
    const big = new Uint8Array(1_000_000).fill(7);
    const tag = { id: 99, step: 0, chunk: 0 };
    void comms[0].send(1, tag, big).catch(() => {});
    await comms[0].close();
    expect((await comms[1].recv(0, tag, 1000)).byteLength).toBe(big.byteLength);
    await expect(comms[0].send(1, tag, big)).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await expect(comms[1].recv(0, { ...tag, id: 100 })).rejects.toMatchObject({ code: 'ERR_PEER_LOST' });
    await comms[1].close();
  });

  it('abort on one rank fails the others with its reason', async () => {
    const comms = createMemoryRing(3);
    const pending = settle([1, 2].map((r) => allreduce(comms[r], new Float32Array(3))));
    comms[0].abort(new RingtrainError('ERR_ABORTED', 'training stopped by the user'));
    for (const s of await pending) expect(reason(s)?.message).toContain('rank 0 aborted: training stopped by the user');
    comms.forEach((c) => c.close());
  });
});

describe('bad arguments', () => {
  it('are refused at once with InvalidArgument', async () => {
    const [c] = createMemoryRing(1);
    const bad: [unknown, object][] = [
      [[1, 2, 3], {}],
      [new Float64Array(2), {}],
      [new Float32Array(2), { op: 'median' }],
      [new Int32Array(2), { compression: 'fp16' }],
      [new Float32Array(2), { algorithm: 'tree' }],
      [new Float32Array(2), { prescale: '2' }],
      [new Int8Array(2), { compression: 'fp16' }],
      [new Float64Array(2), {}],
      [new Float32Array(2), { postscale: NaN }],
      [new Float32Array(2), { segmentBytes: 0 }],
      [new Float32Array(2), { shape: [3] }],
    ];
    for (const [data, opts] of bad) {
      await expect(allreduce(c, data as Float32Array, opts), JSON.stringify(opts)).rejects.toMatchObject({
        code: 'ERR_INVALID_ARGUMENT',
      });
    }
    c.close();
  });
});
