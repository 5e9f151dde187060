/**
 * Where a 2-rank ring over WebRTC waits that the exchange it is held to does not (docs/COLLECTIVES.md,
 * "Why ratio_bidir swings over WebRTC"):
 *   sh scripts/in-netns.sh npx tsx bench/ring-stalls.ts [--runtime node|deno] [--rounds 6] [--mib 64]
 * Prints one JSON line per round: the ring's and the exchange's seconds (rank 0), every arrival gap
 * of 250 ms or more at each rank, each rank's longest event-loop tick (a stall with short ticks is the
 * link's, not a starved process's), and the UDP datagrams the namespace dropped meanwhile.
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import { launchLocalRing, type PeerRuntime } from '../src/comm/launch.node.ts';

const { values } = parseArgs({
  options: {
    runtime: { type: 'string', default: 'node' },
    rounds: { type: 'string', default: '6' },
    mib: { type: 'string', default: '64' },
  },
});
const runtime = values.runtime as PeerRuntime;
if (runtime !== 'node' && runtime !== 'deno') throw new Error(`--runtime must be node or deno, got ${values.runtime}`);
const bytes = Number(values.mib) * 2 ** 20;
if (!(bytes >= 8)) throw new Error(`--mib must be a positive number, got ${values.mib}`);
const PEER = new URL('./ring-stalls-peer.ts', import.meta.url).pathname;

interface Side {
  seconds: number;
  stalls_ms: number[];
  longest_tick_ms: number;
  udp_receive_drops: number;
}
interface RoundLine {
  rank: number;
  round: number;
  ring: Side;
  exchange: Side;
}

const ring = launchLocalRing({
  size: 2,
  script: PEER,
  runtimes: [runtime, runtime],
  args: () => ['--bytes', String(bytes), '--rounds', values.rounds!, '--transport', 'webrtc'],
});
try {
  await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{"done"'))));
  const rounds = ring.peers.map((p) =>
    p.lines.filter((l) => l.startsWith('{"rank"')).map((l) => JSON.parse(l) as RoundLine),
  );
  for (const [r0, r1] of rounds[0].map((r, i) => [r, rounds[1][i]])) {
    const side = (k: 'ring' | 'exchange') => ({
      seconds: Math.round(r0[k].seconds * 1000) / 1000,
      stalls_ms: [r0[k].stalls_ms, r1[k].stalls_ms],
      longest_tick_ms: [r0[k].longest_tick_ms, r1[k].longest_tick_ms],
      udp_receive_drops: r0[k].udp_receive_drops,
    });
    process.stdout.write(JSON.stringify({ round: r0.round, ring: side('ring'), exchange: side('exchange') }) + '\n');
  }
} finally {
  ring.stop();
}
