/**
 * Three ranks in one Chromium page, each with its own native
 * RTCPeerConnections (simple-peer's browser bundle), signalling through a
 * memory store. Runs a few collectives and leaves the outcome in window.ringResult.
 */
import { joinWebRTCRing } from '../../../src/comm/rings.ts';
import { MemoryStore, StoreSignaler } from '../../../src/comm/store.ts';
import { allgather, allreduce, broadcast } from '../../../src/collectives/index.ts';

async function rank(r: number, size: number, store: MemoryStore): Promise<unknown> {
  const comm = await joinWebRTCRing({ rank: r, size, signaler: new StoreSignaler(store, r, size, 5) });
  // 300k floats with 1 MiB segments: chunks of 400 KB, so messages are fragmented and glued again.
  const sum = await allreduce(comm, new Float32Array(300_000).fill(r + 1), { name: 'sum', segmentBytes: 1 << 20 });
  const half = await allreduce(
    comm,
    Float32Array.from({ length: 1000 }, (_, i) => i / 1000 + r),
    { name: 'fp16', op: 'average', compression: 'fp16' },
  );
  const gathered = await allgather(
    comm,
    Int32Array.from({ length: r + 1 }, () => r),
    { name: 'gather' },
  );
  const root = await broadcast(comm, Int32Array.of(r * 10, r * 10 + 1), { name: 'bcast', root: size - 1 });
  await comm.close();
  return {
    first: sum[0],
    last: sum[sum.length - 1],
    half500: half[500],
    gathered: Array.from(gathered),
    root: Array.from(root),
  };
}

const size = 3;
const store = new MemoryStore();
(window as unknown as { ringResult: Promise<string> }).ringResult = Promise.all(
  Array.from({ length: size }, (_, r) => rank(r, size, store)),
).then(
  (v) => JSON.stringify(v),
  (e) => JSON.stringify({ error: `${(e as Error).message}` }),
);
