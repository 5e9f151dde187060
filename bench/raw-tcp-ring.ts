/**
 * What plain TCP over loopback gives a ring of N processes on this machine, with no ring code at all:
 *   sh scripts/in-netns.sh npx tsx bench/raw-tcp-ring.ts [--peers 4] [--bytes 268435456] [--runs 3]
 * N Node processes (TCP links, to say their ports) time, turn about, one plain `node:net` stream from
 * rank 0 to rank 1 (`rawTcpStream`, the others idle) and every rank streaming to its right neighbour
 * at once (`rawTcpRing`): the yardsticks `bench allreduce --transport tcp` prints beside its ring, here
 * on their own. Prints one JSON line: per run, the stream's rate, the ring's per-link rate (the slowest
 * link's) and the CPU each cost summed over the ranks, per GiB a link carried; then the medians.
 * On a machine with fewer cores than links the per-link rate falls with N: every byte costs the
 * sender's kernel copy and the receiver's, and the links share the cores one stream had to itself.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { launchLocalRing } from '../src/comm/launch.node.ts';
import { median } from '../src/core/stats.ts';

const { values } = parseArgs({
  options: {
    peers: { type: 'string', default: '4' },
    bytes: { type: 'string', default: String(256 << 20) },
    runs: { type: 'string', default: '3' },
  },
});
const peers = Number(values.peers);
const bytes = Number(values.bytes);
const runs = Number(values.runs);
if (!(Number.isInteger(peers) && peers >= 2)) throw new Error(`--peers must be an integer from 2, got ${values.peers}`);
if (!(Number.isInteger(bytes) && bytes >= 1))
  throw new Error(`--bytes must be a positive integer, got ${values.bytes}`);
if (!(Number.isInteger(runs) && runs >= 1)) throw new Error(`--runs must be an integer from 1, got ${values.runs}`);
if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run under scripts/in-netns.sh: the peers link over loopback in a private network namespace');

const load0 = os.loadavg()[0];
const ring = launchLocalRing({
  size: peers,
  script: new URL('./raw-tcp-ring-peer.ts', import.meta.url).pathname,
  args: () => ['--transport', 'tcp', '--bytes', String(bytes), '--runs', String(runs)],
});
type Run = { seconds: number | null; cpu_ms: number };
type Report = { rank: number; out: Record<'stream' | 'ring', Run[]> };
const reports = (await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{'))))).map(
  (l) => JSON.parse(l) as Report,
);
await Promise.all(ring.peers.map((p) => p.exited));
ring.stop();
const rank0 = reports.find((r) => r.rank === 0)!;
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const GiB = 1024 ** 3;
// Per run: MB/s per link, and CPU seconds over all ranks per GiB that one link carried (the ring: N links).
const figures = (kind: 'stream' | 'ring', links: number) =>
  rank0.out[kind].map((run, i) => ({
    per_link_MBps: round(bytes / run.seconds! / 1e6),
    cpu_s_per_link_GiB: round(reports.reduce((a, r) => a + r.out[kind][i].cpu_ms, 0) / 1000 / ((links * bytes) / GiB)),
  }));
const stream = figures('stream', 1);
const rings = figures('ring', peers);
const streamMBps = round(median(stream.map((r) => r.per_link_MBps)));
const ringMBps = round(median(rings.map((r) => r.per_link_MBps)));
console.log(
  JSON.stringify({
    peers,
    bytes,
    runs,
    cores: os.availableParallelism(),
    load: [round(load0), round(os.loadavg()[0])],
    stream,
    ring: rings,
    stream_MBps: streamMBps,
    ring_per_link_MBps: ringMBps,
    ring_all_links_MBps: round(ringMBps * peers),
    ring_over_stream: round(ringMBps / streamMBps, 3),
  }),
);
process.exit(0);
