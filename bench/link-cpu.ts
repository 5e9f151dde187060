/**
 * Where a WebRTC link spends its CPU, one way and both ways at once:
 *   npm run bench:link-cpu -- [--mib 128]
 * Two Node processes in a private network namespace stream `--mib` MiB over one
 * data channel, first rank 0 -> 1, then both directions at once. Each reads its
 * threads' CPU time from /proc. Prints one JSON line:
 *   one_way_MBps, both_ways_MBps (per direction), and per thread group the CPU
 *   milliseconds per MB sent or received.
 * It explains the allreduce benchmark's ratio: every ring rank sends and
 * receives at once, and libwebrtc does both on one network thread per process.
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import { launchLocalRing } from '../src/comm/launch.node.ts';

const { values } = parseArgs({ options: { mib: { type: 'string', default: '128' } } });
const bytes = Number(values.mib) * 2 ** 20;
if (!(bytes > 0)) throw new Error(`--mib must be a positive number, got ${values.mib}`);
const PEER = new URL('./link-cpu-peer.ts', import.meta.url).pathname;

interface Phase {
  seconds: number;
  cpu: Record<string, number>;
}
interface PeerReport {
  rank: number;
  phases: Record<'one_way' | 'both_ways', Phase>;
}

const ring = launchLocalRing({ size: 2, script: PEER, args: () => ['--bytes', String(bytes)] });
try {
  const [r0, r1] = (await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{'))))).map(
    (l) => JSON.parse(l) as PeerReport,
  );
  await Promise.all(ring.peers.map((p) => p.exited));
  const MB = bytes / 1e6;
  const perMB = (cpu: Record<string, number>, mb: number) =>
    Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, Math.round(((v * 1000) / mb) * 10) / 10]));
  const oneWay = r0.phases.one_way;
  const both = r0.phases.both_ways;
  process.stdout.write(
    JSON.stringify({
      bytes,
      one_way_MBps: Math.round((MB / oneWay.seconds) * 100) / 100,
      both_ways_MBps: Math.round((MB / both.seconds) * 100) / 100,
      cpu_ms_per_MB: {
        sending: perMB(oneWay.cpu, MB),
        receiving: perMB(r1.phases.one_way.cpu, MB),
        // per MB of traffic in each direction: this process sent MB and received MB
        both_ways: perMB(both.cpu, MB),
      },
      load: (await import('node:os')).loadavg()[0],
    }) + '\n',
  );
} finally {
  ring.stop();
}
