import { lendOrSend, type Communicator, type Tag } from '../comm/interface.ts';
import { now } from '../core/events.ts';
import { allreduce, allreduceInPlace, chooseAlgorithm, reduceSettings } from './allreduce.ts';
import { barrier } from './barrier.ts';
import { DEFAULT_SEGMENT_BYTES, type Algorithm, type Compression, type ReduceOptions } from './codecs/types.ts';
import { median } from '../core/stats.ts';
import { SEND_AHEAD } from './transfer/ring.ts';

/**
 * Allreduce bandwidth as nccl-tests reports it, measured on any communicator:
 *   algbw = bytes / time,  busbw = algbw * 2(N-1)/N
 * and, in the same run over the same links, the point-to-point bandwidth from
 * rank 0 to rank 1 (the others wait), so `ratio = busbw / p2p` says how much
 * of the link the ring uses. Every rank must call this; rank 0's figures count.
 */
export interface AllreduceMeasurement {
  peers: number;
  bytes: number;
  fp16: boolean;
  algbw_MBps: number;
  busbw_MBps: number;
  p2p_MBps: number | null;
  ratio: number | null;
  /** Per-direction bandwidth when ranks 0 and 1 send to each other at once (what a 2-rank ring does). */
  p2p_bidir_MBps: number | null;
  /** busbw / p2p_bidir: how much of the link the ring uses when the link carries both directions at once. */
  ratio_bidir: number | null;
  /**
   * Per-link bandwidth when every rank streams to its right neighbour and from its left at once (the
   * ring's traffic on all its links, without sums): the bytes over the slowest link's seconds. At two
   * ranks that ring is the both-ways exchange, and this is p2p_bidir_MBps.
   */
  p2p_ring_MBps: number | null;
  /** busbw / p2p_ring: how much of its links the ring uses when all of them carry the ring's load at once. */
  ratio_ring: number | null;
  /**
   * Median ms on rank 0 between the last segment a timed run received in reduce-scatter and the first
   * in its allgather (null when the runs took no ring): where the ring waits that an exchange does not.
   */
  ring_phase_gap_ms: number | null;
  /**
   * With fp16 only: the float32 allreduce of the same tensor, timed in the same
   * run (interleaved), and fp16's effective speed-up over it (algbw / f32 algbw).
   */
  f32_algbw_MBps?: number;
  fp16_speedup?: number;
  /** Seconds per timed allreduce on this rank (bandwidths use the median). */
  seconds: number[];
  /** Seconds of each round's exchange (p2p_bidir_MBps uses the median), in the order of `seconds`' first rounds. */
  bidir_seconds: number[];
  /** The algorithm 'auto' chose for this size. */
  algorithm: string;
  /** Median time of one allreduce as 'auto' runs it (ms). */
  latency_ms: number;
  /** The same tensor forced round the ring, by recursive doubling, by halving-doubling and by two-shot, timed in the same loop (ms; null above LATENCY_MAX_BYTES). */
  latency_ring_ms: number | null;
  latency_rd_ms: number | null;
  latency_hd_ms: number | null;
  latency_two_shot_ms: number | null;
  /** Rank 0 sends the same bytes to rank 1, which sends them back: one round trip on one link (ms). */
  p2p_rtt_ms: number | null;
  /** latency_ms / p2p_rtt_ms: how many link round trips one allreduce costs. */
  latency_ratio: number | null;
}

/** Above this size the latency loop (each algorithm forced, one at a time) is left out: bandwidth rules there. */
export const LATENCY_MAX_BYTES = 4 * 1024 * 1024;

export interface MeasureOptions {
  bytes: number;
  compression?: Compression;
  iterations?: number;
  segmentBytes?: number;
  timeoutMs?: number;
  /**
   * Called just before and just after each timed allreduce (not the warm-up, the streams or the
   * barriers): the bench's memory windows.
   */
  eachTimed?: { before(): void; after(): void };
}

const MB = 1e6;

/**
 * Pieces a stream may have queued and not yet handed to its link: enough to keep the link busy.
 * Queued all at once, the pieces' frames were a copy of everything streamed. The ring's own window
 * (SEND_AHEAD), so that the exchange the ring is held to keeps no more bytes in flight than the ring.
 */
export const STREAM_WINDOW = SEND_AHEAD;

/**
 * Sends `bytes` to rank `to` and/or receives as many from rank `from` (null: not
 * that direction), in data-channel-sized pieces tagged with collective `id`;
 * resolves when every piece has arrived and every send has been handed over.
 * Receiving runs beside sending, so what the other side sends never waits unasked.
 */
export async function streamBytes(
  comm: Communicator,
  id: number,
  bytes: number,
  to: number | null,
  from: number | null,
  timeoutMs: number,
  step = 0,
  piece = DEFAULT_SEGMENT_BYTES,
): Promise<void> {
  const pieces = Math.ceil(bytes / piece);
  const data = new Uint8Array(Math.min(piece, bytes));
  const send = async () => {
    const sends: Promise<void>[] = [];
    for (let j = 0; j < pieces; j++) {
      if (j >= STREAM_WINDOW) await sends[j - STREAM_WINDOW];
      // Lent where the link reads in place, as the ring's segments are: `data` never changes.
      sends.push(lendOrSend(comm, to!, { id, step, chunk: j }, data.subarray(0, Math.min(piece, bytes - j * piece))));
    }
    await Promise.all(sends);
  };
  const receive = async () => {
    // Each piece goes back to its link once it arrived, as a collective's do: the bench's peak memory is the ring's, not the stream's.
    for (let j = 0; j < pieces; j++) comm.release?.(from!, await comm.recv(from!, { id, step, chunk: j }, timeoutMs));
  };
  await Promise.all([to === null ? undefined : send(), from === null ? undefined : receive()]);
}

/** Rank 0 streams `bytes` to rank 1 in data-channel-sized pieces; rank 1 acknowledges the last. Seconds on rank 0. */
async function pointToPoint(comm: Communicator, bytes: number, timeoutMs: number): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2 || comm.rank > 1) return null;
  if (comm.rank === 1) {
    await streamBytes(comm, id, bytes, null, 0, timeoutMs);
    await comm.send(0, { id, step: 1, chunk: 0 }, new Uint8Array(1));
    return null;
  }
  const t0 = now();
  await streamBytes(comm, id, bytes, 1, null, timeoutMs);
  await comm.recv(1, { id, step: 1, chunk: 0 }, timeoutMs);
  return (now() - t0) / 1000;
}

/**
 * Ranks 0 and 1 stream `bytes` to each other at once (the traffic of a two-rank ring): a ring of
 * streams over those two, whose right and left neighbours are the same rank.
 */
function exchange(comm: Communicator, bytes: number, timeoutMs: number, piece?: number): Promise<number | null> {
  return streamRing(comm, bytes, 2, timeoutMs, piece);
}

/**
 * Each of ranks 0..members-1 streams `bytes` to its right neighbour and receives as many from its
 * left, all at once (the ring's traffic, without its sums), and acknowledges its left when all
 * arrived; the other ranks wait. Seconds of the slowest link on rank 0 (null on the others), each
 * link timed by its sender from its first piece to its receiver's acknowledgement. `piece`: the
 * messages' size (streamBytes'). Every rank calls it.
 */
export async function streamRing(
  comm: Communicator,
  bytes: number,
  members: number,
  timeoutMs: number,
  piece?: number,
): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2 || comm.rank >= members) return null;
  const right = (comm.rank + 1) % members;
  const left = (comm.rank + members - 1) % members;
  const t0 = now();
  await streamBytes(comm, id, bytes, right, left, timeoutMs, 0, piece);
  await comm.send(left, { id, step: 1, chunk: 0 }, new Uint8Array(1));
  await comm.recv(right, { id, step: 1, chunk: 0 }, timeoutMs);
  return slowestOnRankZero(comm, { id, step: 2, chunk: 0 }, (now() - t0) / 1000, members, timeoutMs);
}

/**
 * The largest of ranks 0..members-1's `seconds`, on rank 0 (null on the others): each other member
 * sends its own with `tag`. Only those members call it.
 */
export async function slowestOnRankZero(
  comm: Communicator,
  tag: Tag,
  seconds: number,
  members: number,
  timeoutMs: number,
): Promise<number | null> {
  if (comm.rank !== 0) {
    await comm.send(0, tag, new Uint8Array(new Float64Array([seconds]).buffer));
    return null;
  }
  let slowest = seconds;
  for (let r = 1; r < members; r++) {
    const said = await comm.recv(r, tag, timeoutMs);
    slowest = Math.max(slowest, new DataView(said.buffer, said.byteOffset, 8).getFloat64(0, true));
    comm.release?.(r, said);
  }
  return slowest;
}

/** Rank 0 sends `bytes` to rank 1, which sends the same bytes back once all arrived; seconds on rank 0 (null on the others). Every rank must call it. */
export async function roundTrip(comm: Communicator, bytes: number, timeoutMs: number): Promise<number | null> {
  const id = comm.nextId();
  if (comm.size < 2 || comm.rank > 1) return null;
  if (comm.rank === 1) {
    await streamBytes(comm, id, bytes, null, 0, timeoutMs);
    await streamBytes(comm, id, bytes, 0, null, timeoutMs, 1);
    return null;
  }
  const t0 = now();
  await streamBytes(comm, id, bytes, 1, null, timeoutMs);
  await streamBytes(comm, id, bytes, null, 1, timeoutMs, 1);
  return (now() - t0) / 1000;
}

export async function measureAllreduce(comm: Communicator, o: MeasureOptions): Promise<AllreduceMeasurement> {
  const compression = o.compression ?? 'none';
  const timeoutMs = o.timeoutMs ?? 120_000;
  // Five rounds up to 64 MiB: over WebRTC one retransmission stall (0.3-1.6 s) lands in a random 64 MiB run, ring
  // or exchange, and the median of three let a single one move ratio_bidir by a fifth (docs/COLLECTIVES.md).
  const iterations = o.iterations ?? (o.bytes <= 64 * 1024 * 1024 ? 5 : 3);
  const count = Math.floor(o.bytes / 4);
  const data = benchTensor(count, comm.rank);
  // In place and averaged, as a step's gradient is reduced (allreduce's own copy of the tensor is not what training pays).
  const opts = {
    name: 'bench',
    compression,
    segmentBytes: o.segmentBytes,
    timeoutMs,
    op: 'average' as const,
    chunkBytes: count * 4,
  };
  // Warm up at full size (up to 64 MiB): SCTP windows open, buffers get allocated, loops get compiled.
  const warm = data.subarray(0, Math.min(count, 16 << 20));
  await allreduceInPlace(comm, warm, { ...opts, name: 'warmup', chunkBytes: warm.byteLength });
  // Interleave point-to-point, allreduce and exchange runs so all see the same machine load; take medians.
  const p2pSeconds: number[] = [];
  const bidirSeconds: number[] = [];
  const ringSeconds: number[] = [];
  const seconds: number[] = [];
  const f32Seconds: number[] = [];
  const gaps: number[] = [];
  const latencyIterations = o.iterations ?? 20;
  const eachTimed = o.eachTimed;
  const timed = async (o: ReduceOptions & { chunkBytes: number }, into: number[], gapsInto?: number[]) => {
    await barrier(comm, { timeoutMs });
    const watch = gapsInto ? watchPhaseGap(comm) : null;
    eachTimed?.before();
    const t0 = now();
    await allreduceInPlace(comm, data, o);
    into.push((now() - t0) / 1000);
    eachTimed?.after();
    const gap = watch?.stop();
    if (gap != null) gapsInto!.push(gap);
  };
  for (let i = 0; i < iterations; i++) {
    await barrier(comm, { timeoutMs });
    const p = await pointToPoint(comm, count * 4, timeoutMs);
    if (p !== null) p2pSeconds.push(p);
    await timed(opts, seconds, gaps);
    // fp16's speed-up is only meaningful against float32 under the same load: time both, turn about.
    if (compression === 'fp16') await timed({ ...opts, compression: 'none' }, f32Seconds);
    // In the ring's messages: its segments (float32: 4 bytes an element, no header), whatever segmentBytes says.
    const piece = 4 * Math.floor((o.segmentBytes ?? DEFAULT_SEGMENT_BYTES) / 4);
    await timeStreams(comm, count * 4, piece, timeoutMs, bidirSeconds, ringSeconds);
  }
  const { rtt, ring, rd, hd, twoShot } =
    o.bytes <= LATENCY_MAX_BYTES
      ? await timeLatencies(comm, count * 4, latencyIterations, timeoutMs, (name, algorithm, into) =>
          timed(algorithm ? { ...opts, name, algorithm } : opts, into ?? seconds),
        )
      : { rtt: [], ring: [], rd: [], hd: [], twoShot: [] };
  const algorithm = chooseAlgorithm(reduceSettings(data, opts, 'measure'), count * 4, comm.size);
  const runs = { seconds, p2pSeconds, bidirSeconds, ringSeconds, f32Seconds, gaps };
  return summarize(comm.size, count * 4, compression, algorithm, runs, { rtt, ring, rd, hd, twoShot });
}

/**
 * The bench's tensor, ((i * 7919 + rank * 31) mod 1000) / 1000 - 0.5, which repeats every 1000
 * elements: one period is computed and copied along. A loop over every element boxed each value
 * until it was optimised and grew V8's young generation before the first allreduce (Deno: 12 MB).
 */
function benchTensor(count: number, rank: number): Float32Array {
  const data = new Float32Array(count);
  const period = new Float32Array(Math.min(1000, count));
  for (let i = 0; i < period.length; i++) period[i] = ((i * 7919 + rank * 31) % 1000) / 1000 - 0.5;
  for (let at = 0; at < count; at += period.length) data.set(period.subarray(0, count - at), at);
  return data;
}

/**
 * The ring's traffic without the ring, under the same load as the allreduce beside it: ranks 0 and 1
 * both ways at once (seconds into `bidir`), and every link at once (into `ring`), in messages of
 * `piece` bytes. At two ranks the ring of streams is that exchange: one run, counted in both.
 */
async function timeStreams(
  comm: Communicator,
  bytes: number,
  piece: number,
  timeoutMs: number,
  bidir: number[],
  ring: number[],
): Promise<void> {
  await barrier(comm, { timeoutMs });
  const b = await exchange(comm, bytes, timeoutMs, piece);
  if (b !== null) bidir.push(b);
  if (comm.size === 2) {
    if (b !== null) ring.push(b);
    return;
  }
  await barrier(comm, { timeoutMs });
  const r = await streamRing(comm, bytes, comm.size, timeoutMs, piece);
  if (r !== null) ring.push(r);
}

/** The figures of measureAllreduce from its timed runs (seconds each) and latency loops. */
function summarize(
  size: number,
  bytes: number,
  compression: Compression,
  algorithm: string,
  runs: Record<'seconds' | 'p2pSeconds' | 'bidirSeconds' | 'ringSeconds' | 'f32Seconds' | 'gaps', number[]>,
  { rtt, ring, rd, hd, twoShot }: Latencies,
): AllreduceMeasurement {
  const { seconds, p2pSeconds, bidirSeconds, ringSeconds, f32Seconds, gaps } = runs;
  const typical = median(seconds);
  const algbw = bytes / typical / MB;
  const busbw = (algbw * 2 * (size - 1)) / size;
  const p2pMBps = p2pSeconds.length ? bytes / median(p2pSeconds) / MB : null;
  const bidirMBps = bidirSeconds.length ? bytes / median(bidirSeconds) / MB : null;
  const ringMBps = ringSeconds.length ? bytes / median(ringSeconds) / MB : null;
  const f32 = f32Seconds.length ? bytes / median(f32Seconds) / MB : null;
  const ms = (s: number[]) => (s.length ? round(median(s) * 1000, 3) : null);
  return {
    peers: size,
    bytes,
    fp16: compression === 'fp16',
    algbw_MBps: round(algbw),
    busbw_MBps: round(busbw),
    p2p_MBps: p2pMBps === null ? null : round(p2pMBps),
    ratio: p2pMBps === null ? null : round(busbw / p2pMBps, 3),
    p2p_bidir_MBps: bidirMBps === null ? null : round(bidirMBps),
    ratio_bidir: bidirMBps === null ? null : round(busbw / bidirMBps, 3),
    p2p_ring_MBps: ringMBps === null ? null : round(ringMBps),
    ratio_ring: ringMBps === null ? null : round(busbw / ringMBps, 3),
    ring_phase_gap_ms: gaps.length ? round(median(gaps), 1) : null,
    ...(f32 === null ? {} : { f32_algbw_MBps: round(f32), fp16_speedup: round(algbw / f32, 3) }),
    seconds: seconds.map((s) => round(s, 4)),
    bidir_seconds: bidirSeconds.map((s) => round(s, 4)),
    algorithm,
    latency_ms: round(typical * 1000, 3),
    latency_ring_ms: ms(ring),
    latency_rd_ms: ms(rd),
    latency_hd_ms: ms(hd),
    latency_two_shot_ms: ms(twoShot),
    p2p_rtt_ms: ms(rtt),
    latency_ratio: rtt.length ? round(typical / median(rtt), 3) : null,
  };
}

/**
 * Watches this rank's ring phases until stop(), which gives the ms from the last segment received
 * in reduce-scatter to the first received in allgather (null if either never came).
 */
function watchPhaseGap(comm: Communicator): { stop(): number | null } {
  let lastScatter: number | null = null;
  let firstGather: number | null = null;
  const off = comm.events.on((e) => {
    if (e.type !== 'chunk-recv' || e.rank !== comm.rank) return;
    if (e.phase === 'reduce-scatter') lastScatter = e.t;
    else if (e.phase === 'allgather') firstGather ??= e.t;
  });
  return {
    stop() {
      off();
      return lastScatter === null || firstGather === null ? null : firstGather - lastScatter;
    },
  };
}

type Latencies = Record<'rtt' | 'ring' | 'rd' | 'hd' | 'twoShot', number[]>;

/**
 * Latency: small tensors, many runs, each algorithm forced in turn and a link round trip beside
 * them; `timed(name, algorithm, into)` times one allreduce (no algorithm: as 'auto' runs it).
 */
async function timeLatencies(
  comm: Communicator,
  bytes: number,
  iterations: number,
  timeoutMs: number,
  timed: (name: string, algorithm?: Algorithm, into?: number[]) => Promise<void>,
): Promise<Latencies> {
  const l: Latencies = { rtt: [], ring: [], rd: [], hd: [], twoShot: [] };
  for (let i = 0; i < iterations; i++) {
    await barrier(comm, { timeoutMs });
    const r = await roundTrip(comm, bytes, timeoutMs);
    if (r !== null) l.rtt.push(r);
    await timed('bench-ring', 'ring', l.ring);
    await timed('bench-rd', 'recursive-doubling', l.rd);
    await timed('bench-hd', 'halving-doubling', l.hd);
    await timed('bench-two-shot', 'two-shot', l.twoShot);
    await timed('bench');
  }
  return l;
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** One size of the algorithm sweep: the median time of each algorithm, forced (ms). */
export interface SweepPoint {
  bytes: number;
  ring_ms: number;
  rd_ms: number;
  hd_ms: number;
  two_shot_ms: number;
}

export interface AlgorithmSweep {
  peers: number;
  points: SweepPoint[];
  /** The largest size at which recursive doubling was no slower than either other: `smallBytes` to set. */
  small_bytes: number;
  /** The largest size at which recursive doubling, halving-doubling or two-shot was no slower than the ring (at least small_bytes): `mediumBytes` to set. */
  medium_bytes: number;
}

/** The algorithms the sweep times, forced, turn about. */
const SWEPT = ['ring', 'recursive-doubling', 'halving-doubling', 'two-shot'] as const;

/** Sizes the sweep times, 1 KiB to 4 MiB by factors of 4. */
export const SWEEP_BYTES = [1, 4, 16, 64, 256, 1024, 4096].map((k) => k * 1024);

/**
 * Times the ring, recursive doubling, halving-doubling and two-shot, each forced, turn
 * about at every size, to find where each stops winning (`DEFAULT_SMALL_BYTES`
 * and `DEFAULT_MEDIUM_BYTES` come from this). Every rank must call it; rank 0's figures count.
 */
export async function measureSweep(
  comm: Communicator,
  o: { sizes?: number[]; iterations?: number; timeoutMs?: number } = {},
): Promise<AlgorithmSweep> {
  const timeoutMs = o.timeoutMs ?? 120_000;
  const iterations = o.iterations ?? 9;
  const points: SweepPoint[] = [];
  for (const bytes of o.sizes ?? SWEEP_BYTES) {
    const data = new Float32Array(Math.max(1, Math.floor(bytes / 4))).fill(comm.rank + 1);
    const times: Record<(typeof SWEPT)[number], number[]> = {
      ring: [],
      'recursive-doubling': [],
      'halving-doubling': [],
      'two-shot': [],
    };
    for (let i = 0; i <= iterations; i++) {
      for (const algorithm of SWEPT) {
        await barrier(comm, { timeoutMs });
        const t0 = now();
        await allreduce(comm, data, { name: `sweep-${algorithm}`, algorithm, timeoutMs });
        // The first round warms up (and negotiates the new size): not counted.
        if (i > 0) times[algorithm].push(now() - t0);
      }
    }
    const ms = (a: keyof typeof times) => round(median(times[a]), 3);
    points.push({
      bytes: data.byteLength,
      ring_ms: ms('ring'),
      rd_ms: ms('recursive-doubling'),
      hd_ms: ms('halving-doubling'),
      two_shot_ms: ms('two-shot'),
    });
  }
  let small = 0;
  let medium = 0;
  for (const p of points) {
    if (p.rd_ms <= Math.min(p.ring_ms, p.hd_ms, p.two_shot_ms)) small = p.bytes;
    if (Math.min(p.rd_ms, p.hd_ms, p.two_shot_ms) <= p.ring_ms) medium = p.bytes;
  }
  return { peers: comm.size, points, small_bytes: small, medium_bytes: Math.max(small, medium) };
}
