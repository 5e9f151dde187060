/**
 * One rank of the allreduce benchmark over WebRTC or TCP (started by bench-allreduce.node.ts,
 * Node or Deno). Rank 0 prints the measurement as one JSON line.
 */
import process from 'node:process';
import { joinRingFromArgs } from '../../comm/local-ring-peer.node.ts';
import { measureAllreduce, measureSweep, type AllreduceMeasurement } from '../../collectives/measure.ts';
import { median } from '../../core/stats.ts';
import { PeakRssWindows } from '../peak-rss.node.ts';
import { rawTcpRing, rawTcpStream } from './bench-raw-tcp.node.ts';
import type { PeerRss } from './bench-allreduce.node.ts';
import { udpReceiveDrops } from './bench-udp-drops.node.ts';

const { values, rank, comm } = await joinRingFromArgs(
  { bytes: { type: 'string' }, fp16: { type: 'boolean' }, sweep: { type: 'boolean' }, iterations: { type: 'string' } },
  () => ({
    // Experiments only: RINGTRAIN_HIGH_WATER / RINGTRAIN_POLL_MS override the send-buffer knobs.
    highWaterBytes: process.env.RINGTRAIN_HIGH_WATER ? Number(process.env.RINGTRAIN_HIGH_WATER) : undefined,
    pollMs: process.env.RINGTRAIN_POLL_MS ? Number(process.env.RINGTRAIN_POLL_MS) : undefined,
  }),
);
// What the process holds before the measurement allocates its tensor (its links, its libraries): its resident
// memory now, not its high-water mark, which a passing spike of its start-up (seen under load) would leave above
// every later window.
const rssBefore = process.memoryUsage().rss;
// Each timed allreduce is a window of its own: the process's peak covers the streams and the warm-up as well.
const windows = new PeakRssWindows();
try {
  const iterations = values.iterations ? Number(values.iterations) : undefined;
  const bytes = Number(values.bytes);
  // TCP rings are held to plain TCP streams between the same processes, and to plain streams on every link of the
  // ring at once: three runs of each, turn about with the ring's. The stream read by 'data' events runs only after
  // the ring's: its reads are fresh arrays, garbage the collector may not have freed when an allreduce's memory
  // window opens (it put Deno's receiving rank at 2.1x the tensor against 1.4x for the other).
  const tcp = !values.sweep && values.transport === 'tcp';
  const raw: Record<'stream' | 'inPlace' | 'ring', (number | null)[]> = { stream: [], inPlace: [], ring: [] };
  const timeRaw = async (kinds: readonly (keyof typeof raw)[]) => {
    if (kinds.includes('stream')) raw.stream.push(await rawTcpStream(comm, bytes, 120_000, 'data-events'));
    if (kinds.includes('inPlace')) raw.inPlace.push(await rawTcpStream(comm, bytes, 120_000, 'in-place'));
    if (kinds.includes('ring')) raw.ring.push(await rawTcpRing(comm, bytes, 120_000, 'in-place'));
  };
  if (tcp) await timeRaw(['inPlace', 'ring']);
  const dropsBefore = values.transport === 'webrtc' ? udpReceiveDrops() : null;
  const m = values.sweep
    ? await measureSweep(comm, { iterations })
    : await measureAllreduce(comm, {
        bytes,
        compression: values.fp16 ? 'fp16' : 'none',
        iterations,
        eachTimed: { before: () => windows.open(), after: () => windows.close() },
      });
  if (tcp)
    for (const kinds of [['stream', 'inPlace', 'ring'], ['stream', 'inPlace', 'ring'], ['stream']] as const)
      await timeRaw(kinds);
  // Every rank's memory first (the launcher reads one such line from each), then rank 0's measurement.
  const peaks = windows.report();
  const rss: PeerRss = {
    rank,
    before_bytes: rssBefore,
    process_peak_bytes: peaks.process_peak_bytes,
    allreduce_peak_bytes: peaks.window_peak_bytes,
    allreduce_peak_unavailable: peaks.unavailable,
  };
  process.stdout.write(JSON.stringify({ rss }) + '\n');
  const dropsAfter = dropsBefore === null ? null : udpReceiveDrops();
  // Over WebRTC: datagrams the peers' sockets dropped while it measured (bench-udp-drops.node.ts).
  const drops = dropsAfter === null ? {} : { udp_receive_drops: dropsAfter - dropsBefore! };
  if (rank === 0) process.stdout.write(JSON.stringify({ ...m, ...rawTcpFields(raw, m), ...drops }) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ rank, error: (e as Error).message }) + '\n');
  process.exitCode = 1;
}
await comm.close();
process.exit();

/**
 * Medians of the plain streams and the ring's busbw against each: `raw_tcp_MBps` read by 'data' events
 * (issue 34's "plain Node TCP stream"), `raw_tcp_in_place_MBps` read into one reused buffer, as the
 * links read (bytes over rank 0's seconds), and `raw_tcp_ring_MBps`, every link of the ring at once,
 * read in place (bytes over the slowest link's seconds).
 */
function rawTcpFields(raw: Record<'stream' | 'inPlace' | 'ring', (number | null)[]>, m: AllreduceMeasurement | object) {
  if (!('busbw_MBps' in m)) return {};
  const round = (x: number, f: number) => Math.round(x * f) / f;
  const field = (runs: (number | null)[], rate: string, ratio: string) => {
    const seconds = runs.filter((s): s is number => s !== null);
    if (!seconds.length) return {};
    const mbps = m.bytes / median(seconds) / 1e6;
    return { [rate]: round(mbps, 100), [ratio]: round(m.busbw_MBps / mbps, 1000) };
  };
  return {
    ...field(raw.stream, 'raw_tcp_MBps', 'ratio_raw_tcp'),
    ...field(raw.inPlace, 'raw_tcp_in_place_MBps', 'ratio_raw_tcp_in_place'),
    ...field(raw.ring, 'raw_tcp_ring_MBps', 'ratio_raw_tcp_ring'),
  };
}
