/** The communicator's own duties: backpressure, tags, bad calls. */
import { describe, expect, it } from 'vitest';
import { LinkCommunicator } from '../../src/comm/communicator.ts';
import type { Link } from '../../src/comm/link.ts';
import { memoryLinkPair } from '../../src/comm/memory-link.ts';
import { MAX_FRAME_PAYLOAD } from '../../src/comm/frame.ts';

/** A link that queues what it is given and lets 64 KiB through every 2 ms, like a slow network. */
function throttled(inner: Link): Link & { maxQueued: number; stop(): void } {
  const queue: Uint8Array[] = [];
  let queued = 0;
  const link = {
    peer: inner.peer,
    maxQueued: 0,
    send(m: Uint8Array) {
      queue.push(m);
      queued += m.byteLength;
      link.maxQueued = Math.max(link.maxQueued, queued);
    },
    bufferedAmount: () => queued,
    onMessage: (h: (m: Uint8Array) => void) => inner.onMessage(h),
    onClose: (h: (r?: Error) => void) => inner.onClose(h),
    close: () => {
      clearInterval(timer);
      inner.close();
    },
    stop: () => clearInterval(timer),
  };
  const timer = setInterval(() => {
    let budget = 64 * 1024;
    while (queue.length && budget > 0) {
      const m = queue.shift()!;
      queued -= m.byteLength;
      budget -= m.byteLength;
      try {
        inner.send(m);
      } catch {
        // The other end closed (the test is tearing down): what was still queued is dropped, as a network would.
        clearInterval(timer);
        return;
      }
    }
  }, 2);
  return link;
}

describe('LinkCommunicator', () => {
  it('never queues more than its high-water mark on a slow link, and loses nothing', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    const slow = throttled(a);
    const highWaterBytes = 512 * 1024;
    const c0 = new LinkCommunicator(0, 2, new Map([[1, slow]]), { highWaterBytes, peerTimeoutMs: 0 });
    const c1 = new LinkCommunicator(1, 2, new Map([[0, b]]), { peerTimeoutMs: 0 });
    const messages = Array.from({ length: 12 }, (_, k) =>
      Uint8Array.from({ length: 300_000 + k }, (_, i) => (i + k) & 255),
    );
    const sent = messages.map((m, k) => c0.send(1, { id: 1, step: 0, chunk: k }, m));
    const got = await Promise.all(messages.map((_, k) => c1.recv(0, { id: 1, step: 0, chunk: k }, 10_000)));
    await Promise.all(sent);
    got.forEach((g, k) => expect(Buffer.compare(g, messages[k]), `message ${k}`).toBe(0));
    expect(slow.maxQueued).toBeLessThanOrEqual(highWaterBytes);
    expect(slow.maxQueued).toBeGreaterThan(0);
    await Promise.all([c0.close(), c1.close()]);
    slow.stop();
  });

  it('keeps messages apart by tag, whatever order they arrive in', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    const c0 = new LinkCommunicator(0, 2, new Map([[1, a]]));
    const c1 = new LinkCommunicator(1, 2, new Map([[0, b]]));
    await c0.send(1, { id: 5, step: 1, chunk: 0 }, Uint8Array.of(51));
    await c0.send(1, { id: 4, step: 0, chunk: 2 }, Uint8Array.of(42));
    expect(Array.from(await c1.recv(0, { id: 4, step: 0, chunk: 2 }, 1000))).toEqual([42]);
    expect(Array.from(await c1.recv(0, { id: 5, step: 1, chunk: 0 }, 1000))).toEqual([51]);
    await expect(c1.recv(0, { id: 6, step: 0, chunk: 0 }, 50)).rejects.toMatchObject({
      code: 'ERR_COLLECTIVE_TIMEOUT',
      detail: { waitingFor: [0] },
    });
    await Promise.all([c0.close(), c1.close()]);
  });

  it('lends a payload to a link that reads it where it lies: copied by send, read in place by lend until it resolves', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    const c0 = new LinkCommunicator(0, 2, new Map([[1, a]]));
    const c1 = new LinkCommunicator(1, 2, new Map([[0, b]]));
    const copied = Uint8Array.of(1, 2, 3);
    const sent = c0.send(1, { id: 1, step: 0, chunk: 0 }, copied);
    copied[0] = 9;
    // A payload larger than one frame, lent: the link reads every fragment when it sends it, not before.
    const lentBytes = new Uint8Array(MAX_FRAME_PAYLOAD + 100).fill(7);
    const lent = c0.lend(1, { id: 1, step: 0, chunk: 1 }, lentBytes);
    lentBytes[0] = 8;
    lentBytes[MAX_FRAME_PAYLOAD + 99] = 8;
    await Promise.all([sent, lent]);
    // Once lend resolved nothing reads the payload any more.
    lentBytes.fill(0);
    expect(Array.from(await c1.recv(0, { id: 1, step: 0, chunk: 0 }, 1000))).toEqual([1, 2, 3]);
    const got = await c1.recv(0, { id: 1, step: 0, chunk: 1 }, 1000);
    expect(got.byteLength).toBe(MAX_FRAME_PAYLOAD + 100);
    expect([got[0], got[1], got[MAX_FRAME_PAYLOAD + 98], got[MAX_FRAME_PAYLOAD + 99]]).toEqual([8, 7, 7, 8]);
    await Promise.all([c0.close(), c1.close()]);
  });

  it('fails a lent send whose link goes down before it went as the loss of that peer', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    const c0 = new LinkCommunicator(0, 2, new Map([[1, a]]), { peerTimeoutMs: 0 });
    const c1 = new LinkCommunicator(1, 2, new Map([[0, b]]), { peerTimeoutMs: 0 });
    const lent = c0.lend(1, { id: 2, step: 0, chunk: 0 }, new Uint8Array(64));
    b.close();
    await expect(lent).rejects.toMatchObject({ code: 'ERR_PEER_LOST', detail: { peer: 1 } });
    await Promise.allSettled([c0.close(), c1.close()]);
  });

  it('refuses bad ranks and missing links', async () => {
    const [a, b] = memoryLinkPair(0, 1);
    expect(() => new LinkCommunicator(2, 2, new Map())).toThrow(/rank 2 is outside 0..1/);
    expect(() => new LinkCommunicator(0, 3, new Map([[1, a]]))).toThrow(/no link to rank 2/);
    const c = new LinkCommunicator(0, 2, new Map([[1, a]]));
    const other = new LinkCommunicator(1, 2, new Map([[0, b]]));
    await expect(c.send(0, { id: 0, step: 0, chunk: 0 }, new Uint8Array(1))).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    await Promise.all([c.close(), other.close()]);
  });
});
