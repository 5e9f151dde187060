/**
 * What an allreduce costs the machine's CPU, beside a round trip of the same bytes:
 *   sh scripts/in-netns.sh npx tsx bench/allreduce-cpu.ts [--peers 4] [--bytes 65536] [--calls 100]
 *     [--algorithms recursive-doubling,halving-doubling,two-shot,ring] [--transport webrtc|tcp] [--in-place]
 *     [--cpu-prof DIR]
 * N Node processes over WebRTC (or TCP links) run `--calls` back-to-back round trips (ranks 0
 * and 1; the others wait), then the same number of allreduces per algorithm,
 * and read their own CPU time around each. Prints one JSON line: per kind, the
 * wall time per call (rank 0), the CPU milliseconds per call summed over the
 * ranks, and `busy_cores` = that CPU over the wall time. On a machine with fewer
 * cores than peers, an allreduce is bound by the CPU its ranks spend in the
 * WebRTC stack: this is the measurement behind docs/COLLECTIVES.md's latency notes.
 * `--in-place` reduces the tensor where it lies (`allreduceInPlace`, as the trainer does) instead
 * of into a new array per call (`allreduce`, the default, which the figures before it used).
 * `--cpu-prof DIR` has every rank profile its timed calls of each kind, and nothing else (not the
 * set-up, nor the warm-up), into DIR/rank-R-KIND.cpuprofile (Node peers; open in Chrome's DevTools).
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { launchLocalRing } from '../src/comm/launch.node.ts';

const { values } = parseArgs({
  options: {
    peers: { type: 'string', default: '4' },
    bytes: { type: 'string', default: '65536' },
    calls: { type: 'string', default: '100' },
    algorithms: { type: 'string', default: 'recursive-doubling,halving-doubling,two-shot,ring' },
    transport: { type: 'string', default: 'webrtc' },
    'in-place': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const peers = Number(values.peers);
const bytes = Number(values.bytes);
const calls = Number(values.calls);
if (!(Number.isInteger(peers) && peers >= 2)) throw new Error(`--peers must be an integer from 2, got ${values.peers}`);
if (!(Number.isInteger(bytes) && bytes >= 4)) throw new Error(`--bytes must be an integer from 4, got ${values.bytes}`);
if (!(Number.isInteger(calls) && calls >= 1)) throw new Error(`--calls must be an integer from 1, got ${values.calls}`);
if (process.env.RINGTRAIN_NETNS !== '1')
  throw new Error('run under scripts/in-netns.sh: the peers talk over WebRTC in a private network namespace');

const PEER = new URL('./allreduce-cpu-peer.ts', import.meta.url).pathname;
const ring = launchLocalRing({
  size: peers,
  script: PEER,
  args: () => [
    ...['--bytes', String(bytes), '--calls', String(calls)],
    ...['--algorithms', values.algorithms!, '--transport', values.transport!],
    ...(values['in-place'] ? ['--in-place'] : []),
    ...(values['cpu-prof'] ? ['--cpu-prof', path.resolve(values['cpu-prof'])] : []),
  ],
});
type Report = { rank: number; out: Record<string, { wall_ms: number; cpu_ms: number }> };
const reports = (await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{'))))).map(
  (l) => JSON.parse(l) as Report,
);
await Promise.all(ring.peers.map((p) => p.exited));
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;
const kinds = Object.keys(reports[0].out);
const result: Record<string, unknown> = {
  peers,
  bytes,
  calls,
  in_place: values['in-place'],
  cores: os.availableParallelism(),
  load: os.loadavg()[0],
};
for (const kind of kinds) {
  const wall = reports[0].out[kind].wall_ms;
  const cpu = reports.reduce((a, r) => a + r.out[kind].cpu_ms, 0);
  result[kind] = { wall_ms: round(wall), cpu_ms: round(cpu), busy_cores: round(cpu / wall, 2) };
}
const rtt = reports[0].out['round-trip'].wall_ms;
result.ratio_to_round_trip = Object.fromEntries(
  kinds.filter((k) => k !== 'round-trip').map((k) => [k, round(reports[0].out[k].wall_ms / rtt, 2)]),
);
console.log(JSON.stringify(result));
process.exit(0);
