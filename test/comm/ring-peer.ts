/**
 * One rank of a local WebRTC ring, for test/comm/webrtc-ring.test.ts. Runs
 * under Node (tsx) and under Deno alike. Every rank can compute every rank's
 * input (seeded), so each checks its own results and prints one JSON line.
 *
 *   --scenario check     every collective once (allreduce by each algorithm), checked against references,
 *                        then a stream of odd-sized messages to the right neighbour, every byte compared
 *   --scenario failures  a mismatch, a timeout, then a good allreduce
 *   --scenario kill      allreduces until a peer is killed; prints READY first
 *   --scenario horovod   the Horovod conformance cases that leave the ring usable, in order
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import { MAX_FRAME_PAYLOAD } from '../../src/comm/frame.ts';
import { joinLocalRing } from '../../src/comm/local-ring.node.ts';
import { CAN_FREE_RECEIVED } from '../../src/comm/webrtc-buffers.ts';
import { allgather, allreduce, allreduceFused, alltoall, barrier, broadcast } from '../../src/collectives/index.ts';
import type { Tensor } from '../../src/collectives/codecs/types.ts';
import { detectRuntime } from '../../src/core/runtime.ts';
import { input, reference, tolerance, type Kind } from '../collectives/reference.ts';
import { CASES } from '../collectives/horovod-cases.ts';

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    rank: { type: 'string' },
    size: { type: 'string' },
    scenario: { type: 'string' },
  },
});
const rank = Number(values.rank);
const size = Number(values.size);
const out = (o: object) => process.stdout.write(JSON.stringify({ rank, runtime: detectRuntime(), ...o }) + '\n');

function checksum(t: Tensor): string {
  const b = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 0x01000193) >>> 0;
  return h.toString(16);
}

function expectClose(what: string, got: Tensor, kind: Kind, op: 'sum' | 'max' | 'average', count: number): void {
  const inputs = Array.from({ length: size }, (_, r) => input(kind, op, count, r));
  const ref = reference(op, inputs);
  if (got.length !== count) throw new Error(`${what}: length ${got.length}, expected ${count}`);
  for (let i = 0; i < count; i++) {
    if (Math.abs(got[i] - ref[i]) > tolerance(kind, op, inputs, i, ref[i]))
      throw new Error(`${what}: element ${i} is ${got[i]}, reference ${ref[i]}`);
  }
}

function expectEqual(what: string, got: ArrayLike<number>, want: ArrayLike<number>): void {
  if (got.length !== want.length) throw new Error(`${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++)
    if (got[i] !== want[i]) throw new Error(`${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
}

/** Byte i of the k-th message rank `from` streams to its right neighbour. */
const streamed = (from: number, k: number, i: number) => (i * 31 + k * 7 + from * 13) & 255;
/** Around one and several frames (MAX_FRAME_PAYLOAD each), twice over. */
const STREAM_SIZES = [1, 15, 17, 4097, MAX_FRAME_PAYLOAD - 1, MAX_FRAME_PAYLOAD, MAX_FRAME_PAYLOAD + 1, 600_001];

function expectStreamed(what: string, m: Uint8Array, from: number, k: number, bytes: number): void {
  if (m.byteLength !== bytes) throw new Error(`${what}: ${m.byteLength} bytes, expected ${bytes}`);
  for (let i = 0; i < bytes; i++)
    if (m[i] !== streamed(from, k, i))
      throw new Error(`${what}: byte ${i} is ${m[i]}, expected ${streamed(from, k, i)}`);
}

/**
 * Each rank streams messages of odd sizes to its right neighbour, which compares every byte; it
 * releases three in four at once and holds the rest until all have arrived, then compares those
 * again (later messages must not land in a held one's memory). Returns, per released message, its
 * size and whether its view was empty afterwards (the link detached it).
 */
async function streamOddSizes(): Promise<{ bytes: number; emptyAfter: boolean }[]> {
  const id = comm.nextId();
  const [right, left] = [(rank + 1) % size, (rank + size - 1) % size];
  const sizes = [...STREAM_SIZES, ...STREAM_SIZES];
  const sends = sizes.map((bytes, k) =>
    comm.send(
      right,
      { id, step: 0, chunk: k },
      Uint8Array.from({ length: bytes }, (_, i) => streamed(rank, k, i)),
    ),
  );
  const held: [number, Uint8Array][] = [];
  const released: { bytes: number; emptyAfter: boolean }[] = [];
  for (let k = 0; k < sizes.length; k++) {
    const m = await comm.recv(left, { id, step: 0, chunk: k }, 30_000);
    expectStreamed(`message ${k} from rank ${left}`, m, left, k, sizes[k]);
    if (k % 4 === 0) held.push([k, m]);
    else {
      comm.release?.(left, m);
      released.push({ bytes: sizes[k], emptyAfter: m.byteLength === 0 });
    }
  }
  for (const [k, m] of held) {
    expectStreamed(`held message ${k} from rank ${left}`, m, left, k, sizes[k]);
    comm.release?.(left, m);
  }
  await Promise.all(sends);
  return released;
}

// Generous: tests share two cores with other tests, and a starved peer must not look dead.
const comm = await joinLocalRing({ dir: values.dir!, rank, size, peerTimeoutMs: 8000, heartbeatMs: 250 });
const sums: Record<string, string> = {};
try {
  if (values.scenario === 'check') {
    const a = await allreduce(comm, input('float32', 'sum', 300_001, rank), { name: 'f32-sum', segmentBytes: 1 << 20 });
    expectClose('f32 sum', a, 'float32', 'sum', 300_001);
    sums.f32 = checksum(a);
    const b = await allreduce(comm, input('int32', 'max', 1001, rank), {
      name: 'i32-max',
      op: 'max',
      segmentBytes: 1000,
    });
    expectClose('i32 max', b, 'int32', 'max', 1001);
    const c = await allreduce(comm, input('float32', 'average', 5000, rank), {
      name: 'fp16-avg',
      op: 'average',
      compression: 'fp16',
      segmentBytes: 2048,
    });
    expectClose('fp16 average', c, 'fp16', 'average', 5000);
    sums.fp16 = checksum(c);
    // The latency and middle-size algorithms forced, whatever 'auto' picks at these sizes: an odd length in many
    // segments, fp16 on the wire (bitwise equal everywhere: the test compares checksums), and a
    // tensor shorter than the ring (empty blocks).
    for (const algorithm of ['recursive-doubling', 'halving-doubling', 'two-shot'] as const) {
      const f = await allreduce(comm, input('float32', 'sum', 30_001, rank), {
        name: `${algorithm}-f32`,
        algorithm,
        segmentBytes: 8192,
      });
      expectClose(`${algorithm} f32 sum`, f, 'float32', 'sum', 30_001);
      sums[`${algorithm}-f32`] = checksum(f);
      const h = await allreduce(comm, input('float32', 'average', 4999, rank), {
        name: `${algorithm}-fp16`,
        op: 'average',
        compression: 'fp16',
        algorithm,
        segmentBytes: 2048,
      });
      expectClose(`${algorithm} fp16 average`, h, 'fp16', 'average', 4999);
      sums[`${algorithm}-fp16`] = checksum(h);
      const short = await allreduce(comm, input('int32', 'max', size - 1, rank), {
        name: `${algorithm}-short`,
        op: 'max',
        algorithm,
      });
      expectClose(`${algorithm} int32 max of ${size - 1}`, short, 'int32', 'max', size - 1);
    }
    const g = await allgather(
      comm,
      Int32Array.from({ length: rank + 1 }, (_, i) => rank * 100 + i),
      { name: 'gather' },
    );
    expectEqual(
      'allgather',
      g,
      Array.from({ length: size }, (_, r) => Array.from({ length: r + 1 }, (__, i) => r * 100 + i)).flat(),
    );
    const root = size - 1;
    const bc = await broadcast(comm, input('float32', 'sum', 3000, rank, 5), {
      root,
      name: 'bcast',
      segmentBytes: 4000,
    });
    expectEqual('broadcast', bc, input('float32', 'sum', 3000, root, 5));
    const send = Int32Array.from({ length: size * 2 }, (_, i) => rank * 1000 + i);
    const at = await alltoall(comm, send, { name: 'a2a' });
    expectEqual(
      'alltoall',
      at.data,
      Array.from({ length: size }, (_, r) => [r * 1000 + 2 * rank, r * 1000 + 2 * rank + 1]).flat(),
    );
    const fused = await allreduceFused(
      comm,
      [1, 2, 3].map((k) => ({ name: `t${k}`, data: Int32Array.from({ length: k * 10 }, () => rank + 1) })),
      { thresholdBytes: 100 },
    );
    for (const t of fused) expectEqual('fused', t, new Array(t.length).fill((size * (size + 1)) / 2));
    const released = await streamOddSizes();
    await barrier(comm);
    out({ ok: true, sums, released, canFree: CAN_FREE_RECEIVED });
  } else if (values.scenario === 'failures') {
    const errors: Record<string, unknown> = {};
    await allreduce(comm, new Float32Array(rank === 1 ? 7 : 8), { name: 'grad' }).catch(
      (e) => (errors.mismatch = { code: e.code, message: e.message }),
    );
    // The last rank arrives long after the others have given up on it.
    if (rank === size - 1) await new Promise((r) => setTimeout(r, 7000));
    await allreduce(comm, new Float32Array(8), { name: 'late', timeoutMs: 3500 }).catch(
      (e) => (errors.timeout = { code: e.code, message: e.message, waitingFor: e.detail?.waitingFor }),
    );
    const ok = await allreduce(comm, Float32Array.of(rank), { name: 'after', timeoutMs: 10_000 });
    out({ ok: true, errors, after: ok[0] });
  } else if (values.scenario === 'horovod') {
    const passed: string[] = [];
    const failed: Record<string, string> = {};
    for (const c of CASES.filter((k) => !k.breaksRing)) {
      try {
        await c.run(comm);
        passed.push(c.name);
      } catch (e) {
        failed[c.name] = (e as Error).message;
        if (comm.error) break; // the ring is gone: later cases would only repeat it
      }
    }
    out({ ok: true, passed, failed });
  } else if (values.scenario === 'kill') {
    const data = new Float32Array(1 << 20).fill(1);
    out({ ready: true });
    const t0 = Date.now();
    try {
      for (let i = 0; ; i++) {
        await allreduce(comm, data, { name: 'loop', segmentBytes: 64 * 1024 });
        if (i === 1) out({ looping: true }); // the test kills a peer once every rank is past two allreduces
      }
    } catch (e) {
      const err = e as { code: string; message: string; detail?: { peer?: number } };
      out({ ok: true, error: err.code, peer: err.detail?.peer, message: err.message, afterMs: Date.now() - t0 });
    }
  } else {
    throw new Error(`unknown scenario ${values.scenario}`);
  }
} catch (e) {
  out({ ok: false, error: (e as Error).message });
}
await comm.close();
process.exit(0);
