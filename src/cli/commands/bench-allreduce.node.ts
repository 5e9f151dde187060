/**
 * The allreduce benchmark: `ringtrain bench allreduce` and
 * npx tsx bench/allreduce.ts (a thin entry point to this file) --peers N --bytes SIZE --transport webrtc|tcp|tls|memory
 *   [--fp16] [--iterations K]
 * prints one JSON line {peers, bytes, transport, fp16, algbw_MBps, busbw_MBps, p2p_MBps, ratio, ...,
 * latency_ms, latency_ring_ms, latency_rd_ms, latency_hd_ms, latency_two_shot_ms, p2p_rtt_ms, latency_ratio} (see
 * AllreduceMeasurement).
 * WebRTC peers are separate processes in a private network namespace: outside
 * one, this re-runs itself under scripts/in-netns.sh.
 */
import { spawn } from 'node:child_process';
import process from 'node:process';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createMemoryRing } from '../../comm/rings.ts';
import { commandFor, launchLocalRing, type PeerRuntime } from '../../comm/launch.node.ts';
import {
  measureAllreduce,
  measureSweep,
  type AllreduceMeasurement,
  type AlgorithmSweep,
} from '../../collectives/measure.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { packagePath } from '../../core/package-root.node.ts';

export interface BenchOptions {
  peers: number;
  bytes: number;
  /** webrtc, tcp, tls (TCP with --link-tls): one process per peer over real links on loopback; memory: all in this process. */
  transport: 'webrtc' | 'tcp' | 'tls' | 'memory';
  fp16: boolean;
  iterations?: number;
  /** Time the three algorithms over sizes from 1 KiB to 4 MiB instead (prints an AlgorithmSweep). */
  sweep?: boolean;
  /** Runtime of each peer process (webrtc only); default all Node. */
  runtimes?: PeerRuntime[];
}

/** What one peer process held (bench-allreduce-peer.node.ts reports it in one line). */
export interface PeerRss {
  rank: number;
  /** Its high-water mark before the measurement made its tensor: the process and its links. */
  before_bytes: number | null;
  /** Its high-water mark over its whole life: streams, warm-up and yardsticks included. */
  process_peak_bytes: number | null;
  /** The highest high-water mark inside one timed allreduce (null: allreduce_peak_unavailable says why). */
  allreduce_peak_bytes: number | null;
  allreduce_peak_unavailable: string | null;
}

/** Each peer's resident memory (null over the memory transport, whose peers share this process). */
export interface BenchMemory {
  /** Each peer's peak inside the timed allreduces: its high-water mark reset just before each and read just after. */
  allreduce_peak_rss_bytes_by_peer: (number | null)[] | null;
  /** Each peer's high-water mark over the whole bench: warm-up, streams and yardsticks as well. */
  process_peak_rss_bytes_by_peer: (number | null)[] | null;
  /** The same peers' resident memory just before the measurement allocated its tensor (links, libraries). */
  rss_before_bytes_by_peer: (number | null)[] | null;
  /**
   * The largest (allreduce peak - before) / bytes over the peers: what a peer holds per byte of tensor
   * while it reduces (1: the tensor alone). Null where a peer could not reset its high-water mark.
   */
  peak_rss_over_tensor: number | null;
  /** Why peak_rss_over_tensor is null (each peer that could not say, and why); absent when it is not. */
  peak_rss_unavailable?: string;
  /** The same with the whole process's peak in place of the allreduce's. */
  process_peak_rss_over_tensor: number | null;
}

export type BenchResult = Omit<AllreduceMeasurement, 'seconds'> & {
  transport: string;
  /** Each rank's runtime (memory rings run in this process). */
  runtimes: string[];
  seconds: number[];
  /**
   * With --transport tcp: a plain loopback TCP stream from rank 0 to rank 1 (bench-raw-tcp.node.ts) read by 'data'
   * events, as issue 34 measured it, and busbw against it.
   */
  raw_tcp_MBps?: number;
  ratio_raw_tcp?: number;
  /** The same stream read into one reused buffer, as the links read: the fastest plain stream. */
  raw_tcp_in_place_MBps?: number;
  ratio_raw_tcp_in_place?: number;
  /**
   * With --transport tcp: plain loopback TCP streams from every rank to its right neighbour at once, read in place
   * (per link, the slowest link's rate), and busbw against it.
   */
  raw_tcp_ring_MBps?: number;
  ratio_raw_tcp_ring?: number;
  /** With --transport webrtc: datagrams the peers' UDP sockets dropped while it measured (bench-udp-drops.node.ts). */
  udp_receive_drops?: number;
} & BenchMemory;

const SELF = fileURLToPath(import.meta.url);
// Beside this file: .ts in the repository, .js in an install's dist/.
const PEER = fileURLToPath(new URL(`./bench-allreduce-peer.node${extname(SELF)}`, import.meta.url));
// The package ships the script (package.json "files"); from dist/ a relative path would miss it.
const NETNS = packagePath('scripts', 'in-netns.sh');

/** "64MiB", "1M", "4096", "1.5GiB" -> bytes (binary units; the first letter counts). */
export function parseBytes(s: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$/i.exec(s);
  if (!m)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot read '${s}' as a size; write e.g. 4096, 512KiB, 64MiB or 1GiB`,
    );
  const unit = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g'];
  return Math.round(Number(m[1]) * unit);
}

function check(o: BenchOptions): void {
  if (!Number.isInteger(o.peers) || o.peers < 1 || o.peers > 16)
    throw new RingtrainError(ErrorCode.InvalidArgument, `--peers must be an integer from 1 to 16, got ${o.peers}`);
  if (!(o.bytes >= 4))
    throw new RingtrainError(ErrorCode.InvalidArgument, `--bytes must be at least 4 (one float32), got ${o.bytes}`);
  if (!['webrtc', 'tcp', 'tls', 'memory'].includes(o.transport))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--transport must be webrtc, tcp, tls or memory, got ${o.transport}`,
    );
}

export async function benchAllreduce(o: BenchOptions): Promise<BenchResult> {
  if (outsideNetns(o)) return reRunInNetns(o) as Promise<BenchResult>;
  const runtimes = o.transport === 'memory' ? [] : (o.runtimes ?? Array.from({ length: o.peers }, () => 'node'));
  const { result, rss } = await measure<AllreduceMeasurement>({ ...o, sweep: false });
  return { ...shape(result, o.transport, runtimes), ...memoryOf(rss, result.bytes) };
}

/** `--sweep`: the three algorithms, each forced, at sizes from 1 KiB to 4 MiB; `small_bytes` and `medium_bytes` are the thresholds for 'auto'. */
export async function benchSweep(o: BenchOptions): Promise<AlgorithmSweep & { transport: string }> {
  if (outsideNetns(o)) return reRunInNetns(o) as Promise<AlgorithmSweep & { transport: string }>;
  return { transport: o.transport, ...(await measure<AlgorithmSweep>({ ...o, sweep: true })).result };
}

/** Real links between peer processes need a private network namespace: outside one, the command runs itself again in one. */
function outsideNetns(o: BenchOptions): boolean {
  check(o);
  return o.transport !== 'memory' && process.env.RINGTRAIN_NETNS !== '1';
}

/** Rank 0's measurement, and each peer process's memory (null where the peers share this process). */
async function measure<T>(o: BenchOptions): Promise<{ result: T; rss: PeerRss[] | null }> {
  check(o);
  const iterations = o.iterations;
  if (o.transport === 'memory') {
    const comms = createMemoryRing(o.peers);
    const run = (c: (typeof comms)[number]) =>
      o.sweep
        ? measureSweep(c, { iterations })
        : measureAllreduce(c, { bytes: o.bytes, compression: o.fp16 ? 'fp16' : 'none', iterations });
    const results = await Promise.all(comms.map(run));
    comms.forEach((c) => c.close());
    return { result: results[0] as T, rss: null };
  }
  const ring = launchLocalRing({
    size: o.peers,
    script: PEER,
    runtimes: o.runtimes,
    args: () => [
      '--bytes',
      String(o.bytes),
      '--transport',
      o.transport,
      ...(o.fp16 ? ['--fp16'] : []),
      ...(o.sweep ? ['--sweep'] : []),
      ...(iterations ? ['--iterations', String(iterations)] : []),
    ],
  });
  try {
    const line = await ring.peers[0].waitFor((l) => l.startsWith('{') && !l.startsWith(RSS_LINE));
    const parsed = JSON.parse(line);
    if (parsed.error) {
      await Promise.race([Promise.all(ring.peers.map((p) => p.exited)), new Promise((r) => setTimeout(r, 2000))]);
      const why = ring.peers
        .map(
          (p) =>
            `rank ${p.rank} (exit ${p.child.exitCode ?? p.child.signalCode ?? 'still running'}): ${[...p.lines, ...p.stderr].join('').slice(-600)}`,
        )
        .join('\n');
      throw new RingtrainError(ErrorCode.Transport, `benchmark rank 0 failed: ${parsed.error}\n${why}`);
    }
    const rss = await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith(RSS_LINE))));
    await Promise.all(ring.peers.map((p) => p.exited));
    return { result: parsed as T, rss: rss.map((l) => (JSON.parse(l) as { rss: PeerRss }).rss) };
  } finally {
    ring.stop();
  }
}

/** How a peer's memory line begins (bench-allreduce-peer.node.ts prints it before rank 0's measurement). */
const RSS_LINE = '{"rss":';

/** The peers' memory lines as the bench reports them; `bytes` is the tensor's size. */
export function memoryOf(rss: PeerRss[] | null, bytes: number): BenchMemory {
  if (!rss)
    return {
      allreduce_peak_rss_bytes_by_peer: null,
      process_peak_rss_bytes_by_peer: null,
      rss_before_bytes_by_peer: null,
      peak_rss_over_tensor: null,
      process_peak_rss_over_tensor: null,
    };
  const byRank = [...rss].sort((a, b) => a.rank - b.rank);
  const unavailable = byRank
    .filter((r) => r.allreduce_peak_bytes === null)
    .map((r) => `rank ${r.rank}: ${r.allreduce_peak_unavailable ?? 'no figure'}`);
  return {
    allreduce_peak_rss_bytes_by_peer: byRank.map((r) => r.allreduce_peak_bytes),
    process_peak_rss_bytes_by_peer: byRank.map((r) => r.process_peak_bytes),
    rss_before_bytes_by_peer: byRank.map((r) => r.before_bytes),
    peak_rss_over_tensor: worstGrowth(byRank, (r) => r.allreduce_peak_bytes, bytes),
    ...(unavailable.length ? { peak_rss_unavailable: unavailable.join('; ') } : {}),
    process_peak_rss_over_tensor: worstGrowth(byRank, (r) => r.process_peak_bytes, bytes),
  };
}

/** The largest (peak - before) / bytes over the peers, to 3 decimals; null if any peer lacks either figure. */
function worstGrowth(peers: PeerRss[], peakOf: (r: PeerRss) => number | null, bytes: number): number | null {
  const growth = peers.map((r) => {
    const peak = peakOf(r);
    return peak === null || r.before_bytes === null ? NaN : peak - r.before_bytes;
  });
  const worst = Math.max(...growth);
  return Number.isFinite(worst) ? Math.round((worst / bytes) * 1000) / 1000 : null;
}

function shape(m: AllreduceMeasurement, transport: string, runtimes: string[]): Omit<BenchResult, keyof BenchMemory> {
  const { peers, bytes, ...rest } = m;
  return { peers, bytes, transport, runtimes, ...rest };
}

/** Runs this file again inside a private network namespace and returns its JSON line. */
async function reRunInNetns(o: BenchOptions): Promise<unknown> {
  const [cmd, pre] = commandFor('node', SELF);
  const args = [
    '--peers',
    String(o.peers),
    '--bytes',
    String(o.bytes),
    '--transport',
    o.transport,
    ...(o.fp16 ? ['--fp16'] : []),
    ...(o.sweep ? ['--sweep'] : []),
    ...(o.iterations ? ['--iterations', String(o.iterations)] : []),
  ];
  if (o.runtimes) args.push('--runtimes', o.runtimes.join(','));
  const child = spawn('sh', [NETNS, cmd, ...pre, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  const line = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{'))
    throw new RingtrainError(
      ErrorCode.Transport,
      `the benchmark in its network namespace failed (exit ${code}): ${out.slice(-500)}`,
    );
  return JSON.parse(line);
}

export function parseBenchArgs(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      peers: { type: 'string', default: '2' },
      bytes: { type: 'string', default: '64MiB' },
      transport: { type: 'string', default: 'webrtc' },
      fp16: { type: 'boolean', default: false },
      sweep: { type: 'boolean', default: false },
      json: { type: 'boolean', default: true },
      iterations: { type: 'string' },
      runtimes: { type: 'string' },
    },
  });
  return {
    peers: Number(values.peers),
    bytes: parseBytes(values.bytes!),
    transport: values.transport as BenchOptions['transport'],
    fp16: values.fp16!,
    sweep: values.sweep!,
    iterations: values.iterations ? Number(values.iterations) : undefined,
    runtimes: values.runtimes ? (values.runtimes.split(',') as PeerRuntime[]) : undefined,
  };
}

/** The command-line entry: prints the JSON line, or the error on stderr with exit code 1. */
export async function main(argv: string[]): Promise<void> {
  try {
    const o = parseBenchArgs(argv);
    process.stdout.write(JSON.stringify(o.sweep ? await benchSweep(o) : await benchAllreduce(o)) + '\n');
  } catch (e) {
    process.stderr.write(`bench allreduce: ${(e as Error).message}\n`);
    process.exitCode = 1;
  }
}

// Run as a script when re-run inside the network namespace.
if (process.argv[1] && SELF === process.argv[1]) await main(process.argv.slice(2));
