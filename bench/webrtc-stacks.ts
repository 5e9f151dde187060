/**
 * The two WebRTC stacks a Node or Deno peer could use, A/B in one run (issue 34, item 2):
 *   sh scripts/in-netns.sh npx tsx bench/webrtc-stacks.ts [--peers 2] [--mib 64] [--rounds 2]
 *     [--runtimes node,deno]
 * For each round, runtime and stack (@roamhq/wrtc = libwebrtc, what ringtrain ships; node-datachannel
 * = libdatachannel), a ring of `--peers` processes allreduces `--mib` MiB over real data channels.
 * Stacks alternate within a round so that the machine's load falls on both alike. Prints one JSON
 * line per measurement and a last line with the median busbw and p2p rates per runtime and stack,
 * and node-datachannel's ratio to @roamhq/wrtc.
 */
import process from 'node:process';
import { parseArgs } from 'node:util';
import { launchLocalRing, type PeerRuntime } from '../src/comm/launch.node.ts';
import { type AllreduceMeasurement } from '../src/collectives/measure.ts';
import { median } from '../src/core/stats.ts';

const { values } = parseArgs({
  options: {
    peers: { type: 'string', default: '2' },
    mib: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '2' },
    runtimes: { type: 'string', default: 'node,deno' },
  },
});
const peers = Number(values.peers);
const bytes = Math.round(Number(values.mib) * 2 ** 20);
const rounds = Number(values.rounds);
const runtimes = values.runtimes!.split(',') as PeerRuntime[];
const STACKS = ['wrtc', 'ndc'] as const;
const PEER = new URL('./webrtc-stacks-peer.ts', import.meta.url).pathname;

async function once(runtime: PeerRuntime, stack: string): Promise<AllreduceMeasurement> {
  const ring = launchLocalRing({
    size: peers,
    script: PEER,
    runtimes: Array.from({ length: peers }, () => runtime),
    args: () => ['--bytes', String(bytes), '--stack', stack],
  });
  try {
    const parsed = JSON.parse(await ring.peers[0].waitFor((l) => l.startsWith('{')));
    if (parsed.error)
      throw new Error(`${runtime}/${stack}: ${parsed.error}; ${ring.peers[0].stderr.join('').slice(-800)}`);
    await Promise.all(ring.peers.map((p) => p.exited));
    return parsed as AllreduceMeasurement;
  } finally {
    ring.stop();
  }
}

const seen = new Map<string, AllreduceMeasurement[]>();
for (let round = 0; round < rounds; round++) {
  for (const runtime of runtimes) {
    // Alternate which stack goes first, so that neither always runs on the warmer machine.
    for (const stack of round % 2 === 0 ? STACKS : [...STACKS].reverse()) {
      const m = await once(runtime, stack);
      const key = `${runtime}/${stack}`;
      seen.set(key, [...(seen.get(key) ?? []), m]);
      process.stdout.write(JSON.stringify({ round, runtime, stack, ...m }) + '\n');
    }
  }
}
const summary: Record<string, unknown> = { bench: 'webrtc-stacks', peers, bytes, rounds };
for (const runtime of runtimes) {
  const pick = (stack: string, f: keyof AllreduceMeasurement) =>
    median(seen.get(`${runtime}/${stack}`)!.map((m) => Number(m[f])));
  const row: Record<string, number> = {};
  for (const stack of STACKS) {
    row[`${stack}_busbw_MBps`] = pick(stack, 'busbw_MBps');
    row[`${stack}_p2p_MBps`] = pick(stack, 'p2p_MBps');
    row[`${stack}_p2p_bidir_MBps`] = pick(stack, 'p2p_bidir_MBps');
  }
  row.ndc_over_wrtc_busbw = Math.round((row.ndc_busbw_MBps / row.wrtc_busbw_MBps) * 100) / 100;
  row.ndc_over_wrtc_p2p = Math.round((row.ndc_p2p_MBps / row.wrtc_p2p_MBps) * 100) / 100;
  summary[runtime] = row;
}
process.stdout.write(JSON.stringify(summary) + '\n');
