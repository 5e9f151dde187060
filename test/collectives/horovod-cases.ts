/**
 * Horovod's semantics as a conformance suite, written from the behaviour its
 * test_torch.py documents (scale factors, shape checks, first-dimension
 * splits, duplicate names, process sets, dtypes, the response cache). Each
 * case runs on every rank of one ring and checks that rank's own results, so
 * the same cases run over memory links (horovod.test.ts, several sizes) and
 * over real WebRTC in separate Node and Deno processes (ring-peer.ts).
 * Plain throws, no test framework: the peers run outside vitest.
 */
import type { Communicator, Tag } from '../../src/comm/interface.ts';
import {
  allgather,
  allreduce,
  alltoall,
  broadcast,
  reducescatter,
  reducescatterRange,
} from '../../src/collectives/index.ts';
import { cacheOf } from '../../src/collectives/controller/cache.ts';
import { float16ToFloat32, float32ToFloat16 } from '../../src/collectives/codecs/fp16.ts';
import { FALLBACK_STEP, NEGOTIATE_STEP } from '../../src/collectives/controller/negotiate.ts';
import { addProcessSet } from '../../src/collectives/controller/process-set.ts';

export interface Case {
  name: string;
  /** Aborts the ring on purpose: run it on a ring of its own, last. */
  breaksRing?: boolean;
  run(comm: Communicator): Promise<void>;
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  check(got.length === want.length, `${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++)
    check(Object.is(got[i], want[i]) || got[i] === want[i], `${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
}

/** Resolves with the error `p` rejects with; fails if it resolves, or rejects with another code. */
async function failsWith(
  p: Promise<unknown>,
  code: string,
  what: string,
  messagePart?: string,
): Promise<Error & { code: string }> {
  let err: (Error & { code: string }) | null = null;
  try {
    await p;
  } catch (e) {
    err = e as Error & { code: string };
  }
  check(err !== null, `${what}: expected ${code}, but it succeeded`);
  check(err!.code === code, `${what}: expected ${code}, got ${err!.code}: ${err!.message}`);
  if (messagePart)
    check(err!.message.includes(messagePart), `${what}: message '${err!.message}' lacks '${messagePart}'`);
  return err!;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** A communicator that records the step and size of every message it sends (to see negotiation traffic). */
function recording(comm: Communicator): { comm: Communicator; steps: number[]; bytes: number[] } {
  const steps: number[] = [];
  const bytes: number[] = [];
  const wrapped: Communicator = {
    get rank() {
      return comm.rank;
    },
    get size() {
      return comm.size;
    },
    get events() {
      return comm.events;
    },
    get error() {
      return comm.error;
    },
    get stats() {
      return comm.stats;
    },
    send: (peer: number, tag: Tag, payload: Uint8Array) => (
      steps.push(tag.step),
      bytes.push(payload.byteLength),
      comm.send(peer, tag, payload)
    ),
    recv: (peer: number, tag: Tag, timeoutMs?: number) => comm.recv(peer, tag, timeoutMs),
    forget: comm.forget ? (id: number, step: (step: number) => boolean) => comm.forget!(id, step) : undefined,
    nextId: () => comm.nextId(),
    abort: (e) => comm.abort(e),
    close: () => comm.close(),
  };
  return { comm: wrapped, steps, bytes };
}

export const CASES: Case[] = [
  {
    name: 'prescale and postscale must match on every rank, or every rank fails',
    async run(comm) {
      const { rank, size } = comm;
      const data = Float32Array.from([1, 2, 3], (v) => v * (rank + 1));
      const total = (size * (size + 1)) / 2;
      const ok = await allreduce(comm, data, { name: 'scaled', prescale: 0.5, postscale: 4 });
      same(
        ok,
        [1, 2, 3].map((v) => v * total * 2),
        'agreed factors',
      );
      if (size === 1) return;
      // The agreement is cached now: a rank that changes a factor must still be caught.
      const pre = await failsWith(
        allreduce(comm, data, { name: 'scaled', prescale: rank === 1 ? 0.25 : 0.5, postscale: 4 }),
        'ERR_COLLECTIVE_MISMATCH',
        'prescale mismatch',
        'prescale=0.25',
      );
      check(pre.message.includes('scale factors'), 'the mismatch message names scale factors');
      await failsWith(
        reducescatter(comm, data, { name: 'rs-scaled', postscale: rank === size - 1 ? 2 : 3 }),
        'ERR_COLLECTIVE_MISMATCH',
        'postscale mismatch',
        'postscale=',
      );
      const after = await allreduce(comm, Float32Array.of(1), { name: 'after-scale-mismatch' });
      same(after, [size], 'the ring goes on');
    },
  },
  {
    name: 'integer tensors are scaled in float64 and truncated; float16 in float32',
    async run(comm) {
      const { rank, size } = comm;
      const base = [7, -7, 100, -3, 1];
      const mine = base.map((v) => v * (rank + 1));
      const got32 = await allreduce(comm, Int32Array.from(mine), { name: 'int-scale', prescale: 0.3, postscale: 1.7 });
      const want32 = base.map((v) =>
        Math.trunc(1.7 * range(size).reduce((a, r) => a + Math.trunc(v * (r + 1) * 0.3), 0)),
      );
      same(got32, want32, 'int32 prescale 0.3, postscale 1.7');
      const got8 = await allreduce(comm, Int8Array.from(mine), { name: 'int8-scale', prescale: 2.5, op: 'average' });
      const wrap = (x: number) => (x << 24) >> 24;
      const sum8 = base.map((v) =>
        wrap(range(size).reduce((a, r) => a + wrap(Math.trunc(wrap(v * (r + 1)) * 2.5)), 0)),
      );
      same(
        got8,
        sum8.map((s) => Math.trunc(s / size)),
        'int8 prescale 2.5, average (truncated)',
      );
      const half = await allreduce(comm, float32ToFloat16(Float32Array.from([0.5, -1.5, 8])), {
        name: 'f16-scale',
        prescale: 0.5,
        postscale: 2,
      });
      same(
        float16ToFloat32(half),
        [0.5, -1.5, 8].map((v) => v * size),
        'float16 scaling',
      );
    },
  },
  {
    name: 'allgather concatenates along the first dimension and checks every other one',
    async run(comm) {
      const { rank, size } = comm;
      const rows = rank + 1;
      const data = Float32Array.from(range(rows * 3), (i) => rank * 100 + i);
      const got = await allgather(comm, data, { name: 'ag-rows', shape: [rows, 3] });
      same(
        got,
        range(size).flatMap((r) => range((r + 1) * 3).map((i) => r * 100 + i)),
        'uneven first dimensions',
      );
      if (size === 1) return;
      const bad = new Float32Array(2 * (rank + 2));
      await failsWith(
        allgather(comm, bad, { name: 'ag-bad', shape: [2, rank + 2] }),
        'ERR_COLLECTIVE_MISMATCH',
        'second dimension differs',
        'all dimensions but the first',
      );
    },
  },
  {
    name: 'alltoall cuts rows, refuses an uneven default split and checks every other dimension',
    async run(comm) {
      const { rank, size } = comm;
      // Row i of rank r holds r*1000 + i*10 + column.
      const rowsOf = (r: number, n: number) =>
        Int32Array.from(range(n * 2), (k) => r * 1000 + Math.floor(k / 2) * 10 + (k % 2));
      const even = await alltoall(comm, rowsOf(rank, 2 * size), { name: 'a2a-even', shape: [2 * size, 2] });
      same(even.recvSplits, new Array(size).fill(2), 'received rows per rank');
      same(
        even.data,
        range(size).flatMap((r) =>
          [2 * rank, 2 * rank + 1].flatMap((row) => [r * 1000 + row * 10, r * 1000 + row * 10 + 1]),
        ),
        'even split',
      );
      // Explicit splits: rank j gets j+1 rows from everyone.
      const splits = range(size).map((j) => j + 1);
      const n = splits.reduce((a, b) => a + b, 0);
      const uneven = await alltoall(comm, rowsOf(rank, n), { name: 'a2a-splits', shape: [n, 2], splits });
      const first = (rank * (rank + 1)) / 2;
      same(
        uneven.data,
        range(size).flatMap((r) =>
          range(rank + 1).flatMap((k) => [r * 1000 + (first + k) * 10, r * 1000 + (first + k) * 10 + 1]),
        ),
        'explicit splits',
      );
      await failsWith(
        alltoall(comm, new Int32Array(2), { name: 'a2a-sum', splits: new Array(size).fill(0) }),
        'ERR_INVALID_ARGUMENT',
        'splits that do not add up',
      );
      if (size === 1) return;
      await failsWith(
        alltoall(comm, new Float32Array(size + 1), { name: 'a2a-uneven' }),
        'ERR_INVALID_ARGUMENT',
        'uneven default split',
        'does not split evenly',
      );
      await failsWith(
        alltoall(comm, new Float32Array(size * (rank + 1)), { name: 'a2a-dims', shape: [size, rank + 1] }),
        'ERR_COLLECTIVE_MISMATCH',
        'second dimension differs',
        'all dimensions but the first',
      );
    },
  },
  {
    name: 'reducescatter splits along the first dimension, the first ranks taking a row more',
    async run(comm) {
      const { rank, size } = comm;
      const rows = 2 * size + 1;
      const data = Float32Array.from(range(rows * 3), (i) => i + rank);
      const got = await reducescatter(comm, data, { name: 'rs-rows', shape: [rows, 3] });
      const myRows = rank === 0 ? 3 : 2;
      const firstRow = rank === 0 ? 0 : 3 + (rank - 1) * 2;
      const r = reducescatterRange(data.length, size, rank, [rows, 3]);
      check(r.offset === firstRow * 3 && r.count === myRows * 3, `reducescatterRange gives ${JSON.stringify(r)}`);
      const offset = (size * (size - 1)) / 2;
      same(
        got,
        range(myRows * 3).map((k) => size * (firstRow * 3 + k) + offset),
        'rows of the sum',
      );
      await failsWith(
        reducescatter(comm, Float32Array.of(1), { name: 'rs-scalar', shape: [] }),
        'ERR_INVALID_ARGUMENT',
        'a scalar',
        'scalar',
      );
    },
  },
  {
    name: 'two concurrent collectives with the same name are an error',
    async run(comm) {
      const first = allreduce(comm, Float32Array.of(comm.rank), { name: 'dup' });
      await failsWith(
        allreduce(comm, Float32Array.of(comm.rank), { name: 'dup' }),
        'ERR_INVALID_ARGUMENT',
        'second collective named dup',
        "named 'dup' is still running",
      );
      same(await first, [(comm.size * (comm.size - 1)) / 2], 'the first one completes');
      same(
        await allreduce(comm, Float32Array.of(1), { name: 'dup' }),
        [comm.size],
        'the name is free again afterwards',
      );
    },
  },
  {
    name: 'process sets: collectives over a subset, created collectively',
    async run(comm) {
      const { rank, size } = comm;
      const evens = range(size).filter((r) => r % 2 === 0);
      const odds = range(size).filter((r) => r % 2 === 1);
      const evenSet = await addProcessSet(comm, evens, { name: 'evens' });
      const oddSet = odds.length ? await addProcessSet(comm, odds, { name: 'odds' }) : null;
      const mineSet = rank % 2 === 0 ? evenSet : oddSet!;
      const members = rank % 2 === 0 ? evens : odds;
      check(mineSet.rank === members.indexOf(rank) && mineSet.size === members.length, 'set rank and size');
      // Each set reduces on its own while the whole ring runs a collective beside it.
      const [inSet, whole] = await Promise.all([
        allreduce(mineSet, Int32Array.of(rank, 1), { name: 'set-sum' }),
        allreduce(comm, Int32Array.of(1), { name: 'whole-ring' }),
      ]);
      same(inSet, [members.reduce((a, b) => a + b, 0), members.length], 'sum over the set');
      same(whole, [size], 'sum over the ring');
      same(await allgather(mineSet, Int32Array.of(rank), { name: 'set-gather' }), members, 'allgather within the set');
      const other = rank % 2 === 0 ? oddSet : evenSet;
      if (other)
        await failsWith(
          allreduce(other, Int32Array.of(1), { name: 'not-mine' }),
          'ERR_INVALID_ARGUMENT',
          'a collective on a set this rank is not in',
          'is not in process set',
        );
      if (size === 1) return;
      await failsWith(
        addProcessSet(comm, rank === 0 ? [0] : [0, 1], { name: 'disputed' }),
        'ERR_COLLECTIVE_MISMATCH',
        'ranks disagree on the members',
        "process-set 'disputed' of ranks [0]",
      );
      same(await allreduce(comm, Int32Array.of(1), { name: 'after-sets' }), [size], 'the ring goes on');
    },
  },
  {
    name: 'float16 and int8 tensors in every collective',
    async run(comm) {
      const { rank, size } = comm;
      const halfOf = (xs: number[]) => float32ToFloat16(Float32Array.from(xs));
      const sumH = await allreduce(comm, halfOf([0.25 * (rank + 1), -2, 1024]), { name: 'h-sum' });
      same(float16ToFloat32(sumH), [(0.25 * size * (size + 1)) / 2, -2 * size, 1024 * size], 'float16 sum');
      const avgH = await allreduce(comm, halfOf([rank, 3]), { name: 'h-avg', op: 'average' });
      same(float16ToFloat32(avgH), [(size - 1) / 2, 3], 'float16 average');
      const maxH = await allreduce(comm, halfOf([rank, -rank]), { name: 'h-max', op: 'max', algorithm: 'ring' });
      same(float16ToFloat32(maxH), [size - 1, 0], 'float16 max (ring)');
      const sum8 = await allreduce(comm, Int8Array.of(100, -100, rank), { name: 'i8-sum' });
      const wrap = (x: number) => (x << 24) >> 24;
      same(sum8, [wrap(100 * size), wrap(-100 * size), wrap((size * (size - 1)) / 2)], 'int8 sum wraps like int8_t');
      const prod8 = await allreduce(comm, Int8Array.of(2, -1), { name: 'i8-prod', op: 'product' });
      same(prod8, [wrap(2 ** size), size % 2 ? -1 : 1], 'int8 product');
      same(
        float16ToFloat32(await broadcast(comm, halfOf([rank + 0.5]), { name: 'h-bcast', root: size - 1 })),
        [size - 0.5],
        'float16 broadcast',
      );
      same(
        await allgather(comm, Int8Array.of(rank, -rank), { name: 'i8-gather' }),
        range(size).flatMap((r) => [r, -r]),
        'int8 allgather',
      );
      const a2a = await alltoall(
        comm,
        Int8Array.from(range(size), (j) => rank * 10 + j),
        { name: 'i8-a2a' },
      );
      same(
        a2a.data,
        range(size).map((r) => r * 10 + rank),
        'int8 alltoall',
      );
      const rs = await reducescatter(comm, halfOf(range(size).map((j) => j)), { name: 'h-rs' });
      same(float16ToFloat32(rs), [rank * size], 'float16 reducescatter');
      const big = await allreduce(comm, halfOf([60000]), { name: 'h-overflow' });
      same(
        float16ToFloat32(big),
        [size === 1 ? 60000 : Infinity],
        'a float16 sum past 65504 is Infinity, not a clamped value',
      );
    },
  },
  {
    name: 'the response cache: an agreed collective skips the coordinator until something changes',
    async run(parent) {
      const { comm, steps, bytes } = recording(parent);
      const { rank, size } = comm;
      const negotiations = () => steps.filter((s) => s === NEGOTIATE_STEP).length;
      const fallbacks = () => steps.filter((s) => s === FALLBACK_STEP).length;
      const call = (n: number, op: 'sum' | 'max' = 'sum') =>
        allreduce(
          comm,
          Float32Array.from(range(n), () => rank + 1),
          { name: 'cached', op },
        );
      same(await call(4), new Array(4).fill((size * (size + 1)) / 2), 'first call');
      const firstRound = negotiations();
      check(
        size === 1 || rank === 0 || firstRound === 1,
        `rank ${rank} asked the coordinator ${firstRound} times on the first call`,
      );
      const sentBefore = steps.length;
      const fallbacksBefore = fallbacks();
      for (let i = 0; i < 3; i++) same(await call(4), new Array(4).fill((size * (size + 1)) / 2), `cached call ${i}`);
      check(
        negotiations() === firstRound,
        `cached calls went to the coordinator (${negotiations() - firstRound} requests)`,
      );
      check(
        fallbacks() === fallbacksBefore,
        `cached calls asked others to negotiate (${fallbacks() - fallbacksBefore})`,
      );
      // Nothing but the data moves: 4 float32 by recursive doubling is one 16-byte message per round (fold-ins and -outs
      // included), and the agreement's 12-byte fingerprint rides on the first message to each peer.
      const cachedSends = bytes.slice(sentBefore);
      check(
        cachedSends.every((b) => b === 16 || b === 28),
        `cached calls sent only data (sizes ${cachedSends.join(',')})`,
      );
      check(
        size === 1 || cachedSends.filter((b) => b === 28).length === cachedSends.length,
        `every message of a cached call is the first to its peer (sizes ${cachedSends.join(',')})`,
      );
      check(size === 1 || cacheOf(comm).size >= 1, 'the agreement is cached');
      // A new shape is a new agreement: through the coordinator once, then cached again.
      same(await call(5), new Array(5).fill((size * (size + 1)) / 2), 'changed shape');
      check(size === 1 || rank === 0 || negotiations() === firstRound + 1, 'a changed shape is negotiated');
      if (size === 1) return;
      // One rank changes the op of a cached collective: everyone falls back and fails alike.
      await failsWith(
        call(5, rank === 1 ? 'max' : 'sum'),
        'ERR_COLLECTIVE_MISMATCH',
        'op changed on one rank after caching',
        'op=max',
      );
      same(
        await call(5),
        new Array(5).fill((size * (size + 1)) / 2),
        'cached agreement still good after a failed change',
      );
    },
  },
  {
    name: 'a rank late for a cached collective: every rank fails with Timeout naming it, the late one too',
    breaksRing: true,
    async run(comm) {
      const { rank, size } = comm;
      if (size === 1) return;
      await allreduce(comm, Float32Array.of(1), { name: 'late' });
      const late = size - 1;
      if (rank === late) {
        // Arrive only once the others have given up (their abort reaches us as the communicator's error).
        const deadline = Date.now() + 20_000;
        while (!comm.error && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      }
      const err = await failsWith(
        allreduce(comm, Float32Array.of(1), { name: 'late', timeoutMs: 300 }),
        'ERR_COLLECTIVE_TIMEOUT',
        `rank ${rank} with rank ${late} late`,
      );
      same(
        (err as unknown as { detail: { waitingFor: number[] } }).detail.waitingFor,
        [late],
        'the late rank is named',
      );
    },
  },
];
