/**
 * The TCP ring on links of a set speed: issue 34's ring goals where the network, not this machine's
 * shared cores, is what bounds a transfer (as between servers, each with its own CPU).
 *
 *   npx tsx bench/link-bound.ts [--rates 800mbit,1600mbit,3200mbit,6400mbit]
 *     [--peers 2,4] [--bytes 256MiB] [--runtimes node]
 *
 * For each rate and ring size it runs `bench allreduce --transport tcp --json` in a network
 * namespace of its own (scripts/in-netns.sh), under scripts/link-rate.sh, which caps each TCP connection's direction at the rate, and prints one JSON
 * line per case: busbw, the same run's yardsticks (a raw stream, both ways, every link at once) and
 * their ratios, and `busbw_over_rate`, the share of the cap the ring used. A case whose raw stream
 * ran well past the cap was not shaped (IPv6 links, say) and is an error, not a figure. Where the
 * cap is above what the cores move, the ratios fall back to the unshaped ones: the sweep shows where.
 */
import { spawnSync } from 'node:child_process';
import { opt } from './args.ts';

const rates = opt('rates', '800mbit,1600mbit,3200mbit,6400mbit').split(',');
const peerCounts = opt('peers', '2,4').split(',').map(Number);
if (!peerCounts.every((n) => Number.isInteger(n) && n >= 2))
  throw new Error(`--peers takes ring sizes of 2 or more, such as 2,4; got '${opt('peers', '2,4')}'`);
const bytes = opt('bytes', '256MiB');
const runtime = opt('runtimes', 'node');

/** Bytes a second in a tc(8) rate such as 1600mbit or 4gbit (decimal units, as tc reads them). */
function bytesPerSecond(rate: string): number {
  const m = /^(\d+(?:\.\d+)?)(k|m|g)bit$/.exec(rate);
  if (!m) throw new Error(`--rates takes tc rates such as 800mbit or 4gbit, got '${rate}'`);
  return (Number(m[1]) * { k: 1e3, m: 1e6, g: 1e9 }[m[2] as 'k' | 'm' | 'g']) / 8;
}
// Every rate is read before the first case runs: a typo in the last one fails now, not minutes in.
const capsMBps = new Map(rates.map((rate) => [rate, bytesPerSecond(rate) / 1e6]));

const KEPT = [
  'busbw_MBps',
  'p2p_bidir_MBps',
  'ratio_bidir',
  'p2p_ring_MBps',
  'ratio_ring',
  'raw_tcp_MBps',
  'ratio_raw_tcp',
];
const CLI = new URL('../bin/ringtrain.js', import.meta.url).pathname;
const SHAPER = new URL('../scripts/link-rate.sh', import.meta.url).pathname;
const NETNS = new URL('../scripts/in-netns.sh', import.meta.url).pathname;
// Each case gets a fresh namespace (the caps and the port range go with it), even when this runs inside one.
const env = { ...process.env, RINGTRAIN_NETNS: '' };

for (const peers of peerCounts) {
  for (const rate of rates) {
    const cap = capsMBps.get(rate)!;
    const runtimes = Array.from({ length: peers }, () => runtime).join(',');
    const bench = [
      CLI,
      'bench',
      'allreduce',
      '--json',
      '--transport',
      'tcp',
      '--bytes',
      bytes,
      '--peers',
      String(peers),
    ];
    const command = ['sh', SHAPER, rate, process.execPath, ...bench, '--runtimes', runtimes];
    const run = spawnSync('sh', [NETNS, ...command], { encoding: 'utf8', env, maxBuffer: 64 << 20 });
    const line = (run.stdout ?? '').trim().split('\n').pop() ?? '';
    if (run.status !== 0 || !line.startsWith('{'))
      throw new Error(
        `bench allreduce at ${rate}, ${peers} peers failed (${run.status}): ${run.error?.message ?? (run.stderr ?? '').slice(-2000)}`,
      );
    const result = JSON.parse(line) as Record<string, number>;
    if (result.raw_tcp_MBps > cap * 1.2)
      throw new Error(
        `the raw stream moved ${result.raw_tcp_MBps} MB/s under a ${cap} MB/s cap: the links were not shaped`,
      );
    const kept = Object.fromEntries(KEPT.map((k) => [k, result[k]]));
    const busbwOverRate = Math.round((result.busbw_MBps / cap) * 1000) / 1000;
    console.log(
      JSON.stringify({
        rate,
        cap_MBps: cap,
        peers,
        bytes,
        runtime,
        ...kept,
        busbw_over_rate: busbwOverRate,
        peak_rss_over_tensor: result.peak_rss_over_tensor,
      }),
    );
  }
}
