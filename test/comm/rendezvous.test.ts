/** Stores, the store-backed Signaler, and what happens when a rank never shows up. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileStore } from '../../src/comm/file-store.node.ts';
import { MemoryStore, StoreSignaler, type Store } from '../../src/comm/store.ts';
import { joinWebRTCRing } from '../../src/comm/rings.ts';
import { loadWrtc } from '../../src/comm/wrtc.node.ts';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'ringtrain-store-'));
  dirs.push(d);
  return d;
}

for (const [kind, make] of [
  ['memory', () => new MemoryStore()],
  ['file', () => new FileStore(tempDir())],
] as [string, () => Store][]) {
  describe(`${kind} store`, () => {
    it('sets, gets and waits for keys', async () => {
      const s = make();
      expect(await s.get('a/b')).toBeUndefined();
      setTimeout(() => void s.set('a/b', 'one'), 30);
      expect(await s.wait(['a/b'], 2000)).toEqual(['one']);
      await s.set('a/b', 'two');
      expect(await s.get('a/b')).toBe('two');
    });

    it('names the keys that never appeared', async () => {
      const s = make();
      await s.set('here', 'x');
      await expect(s.wait(['here', 'rank/3'], 100)).rejects.toMatchObject({
        code: 'ERR_COLLECTIVE_TIMEOUT',
        detail: { missing: ['rank/3'] },
      });
    });
  });
}

describe('StoreSignaler', () => {
  it('delivers every signal, in order, to the right rank', async () => {
    const store = new FileStore(tempDir());
    const a = new StoreSignaler(store, 0, 3, 5);
    const c = new StoreSignaler(store, 2, 3, 5);
    const got: [number, unknown][] = [];
    c.onSignal((from, data) => got.push([from, data]));
    for (let i = 0; i < 5; i++) a.send(2, { i });
    a.send(1, 'not for rank 2');
    for (const end = Date.now() + 30_000; got.length < 5 && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 20));
    expect(got).toEqual([0, 1, 2, 3, 4].map((i) => [0, { i }]));
    a.close();
    c.close();
  });
});

describe('joining a WebRTC ring', () => {
  it('times out naming the ranks that never came', async () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
    const signaler = new StoreSignaler(new MemoryStore(), 0, 3, 5);
    await expect(
      joinWebRTCRing({ rank: 0, size: 3, signaler, wrtc: loadWrtc(), connectTimeoutMs: 1000 }),
    ).rejects.toMatchObject({
      code: 'ERR_COLLECTIVE_TIMEOUT',
      detail: { waitingFor: [1, 2] },
    });
    signaler.close();
  });

  it('waits for a member that has not signalled yet past the connect timeout, up to the silent-peer limit', async () => {
    const store = new MemoryStore();
    const first = joinWebRTCRing({
      rank: 0,
      size: 2,
      signaler: new StoreSignaler(store, 0, 2, 5),
      wrtc: loadWrtc(),
      connectTimeoutMs: 300,
      silentTimeoutMs: 60_000,
    });
    let settled = false;
    void first.then(
      () => (settled = true),
      () => (settled = true),
    );
    // The late joiner is the stimulus here: rank 1 starts only after rank 0's connect timeout has
    // passed three times over (a member still loading its data); before it, rank 0 must still be waiting.
    await new Promise((r) => setTimeout(r, 1000));
    expect(settled, 'rank 0 gave up on a silent peer at the connect timeout').toBe(false);
    const second = joinWebRTCRing({
      rank: 1,
      size: 2,
      signaler: new StoreSignaler(store, 1, 2, 5),
      wrtc: loadWrtc(),
      connectTimeoutMs: 300,
    });
    const [c0, c1] = await Promise.all([first, second]);
    expect([c0.size, c1.rank]).toEqual([2, 1]);
    c0.close();
    c1.close();
  });

  it('stops at once, with the reason given, when told the membership moved on', async () => {
    const signaler = new StoreSignaler(new MemoryStore(), 0, 2, 5);
    const movedOn = new AbortController();
    const joining = joinWebRTCRing({
      rank: 0,
      size: 2,
      signaler,
      wrtc: loadWrtc(),
      connectTimeoutMs: 60_000,
      abort: movedOn.signal,
    });
    movedOn.abort(new Error('epoch 7 is out'));
    await expect(joining).rejects.toMatchObject({
      code: 'ERR_ABORTED',
      message: expect.stringContaining('epoch 7 is out'),
    });
    signaler.close();
  });

  it('connects two ranks in one process and moves framed data both ways', async () => {
    const store = new MemoryStore();
    const [c0, c1] = await Promise.all(
      [0, 1].map((rank) =>
        joinWebRTCRing({ rank, size: 2, signaler: new StoreSignaler(store, rank, 2, 5), wrtc: loadWrtc() }),
      ),
    );
    const big = Uint8Array.from({ length: 700_000 }, (_, i) => (i * 13) & 255); // three frames
    const tag = { id: 1, step: 0, chunk: 0 };
    const [got1, got0] = await Promise.all([
      c1.recv(0, tag, 10_000),
      c0.recv(1, tag, 10_000),
      c0.send(1, tag, big),
      c1.send(0, tag, big.subarray(1)),
    ]);
    expect(Buffer.compare(got1, big)).toBe(0);
    expect(Buffer.compare(got0, big.subarray(1))).toBe(0);
    c0.close();
    c1.close();
  });
});
