/**
 * `ringtrain simulate`: what a step would cost at 2 … 1,024 peers, from
 * figures measured on real peers (src/sim/cost-model.ts does the
 * math). Link latency and bandwidth come from `ringtrain bench allreduce`
 * JSON lines (--allreduce SMALL LARGE: latency from the smaller message,
 * bandwidth from the larger) or flags; the server's relay capacity from a
 * `bench:signaling` JSON line (--signaling FILE) or a flag. Prints a table,
 * or one JSON object with --json.
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import {
  defaultGroupSize,
  predictSignaling,
  predictStep,
  type Algorithm,
  type StepInputs,
} from '../../sim/cost-model.ts';
import { predictColocatedStep, type HostInputs } from '../../sim/colocated-model.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../../collectives/codecs/types.ts';
import { parseBytes } from './bench-allreduce.node.ts';
import { printLine } from '../host.node.ts';

const ALGORITHMS: Algorithm[] = ['ring', 'recursive-doubling', 'halving-doubling', 'hierarchical', 'diloco'];
export const DEFAULT_PEERS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

function invalid(message: string): RingtrainError {
  return new RingtrainError(ErrorCode.InvalidArgument, message);
}

function positive(raw: unknown, flag: string): number {
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0) throw invalid(`${flag} must be a positive number, got ${JSON.stringify(raw)}.`);
  return v;
}

/** The last JSON line of a bench output file (they print one; logs may come before it). */
function benchJson(path: string, flag: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw invalid(`cannot read ${flag} ${path}: ${(err as Error).message}`);
  }
  const line = text
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.trim().startsWith('{'));
  try {
    if (line) return JSON.parse(line) as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw invalid(`${flag} ${path} holds no JSON line; give the output of the benchmark.`);
}

export interface SimulateOptions {
  computeMs: number;
  gradientBytes: number;
  latencyMs: number;
  bandwidthMBps: number;
  relayPerS: number;
  signalsPerLink: number;
  changesPerPeerHour: number;
  diLoCoH: number;
  groupSize?: number;
  peers: number[];
  /** Peers sharing hosts (--peers-per-host): the CPU inputs of the co-located model. */
  hosts?: HostOptions;
}

export interface HostOptions {
  peersPerHost: number;
  coresPerHost: number;
  computeCpuMs: number;
  cpuMsPerMB: number;
  cpuMsPerMessage: number;
  cpuMsPerCollective: number;
  smallCollectives: number;
  /** Worker CPU-ms per step of one lone trainer with P on the host, by P (--compute-cpu-crowded); absent: flat. */
  computeCpuCrowdedMs?: Record<number, number>;
}

/** --compute-cpu-crowded: "1=190,2=194,8=188" (P=CPU-ms), or a file whose last JSON line is simulator-check's input-crowded line. */
function crowdedOption(raw: unknown): Record<number, number> | undefined {
  if (raw === undefined) return undefined;
  const text = String(raw);
  const given = /^\s*\d+\s*=/.test(text)
    ? Object.fromEntries(text.split(',').map((kv) => kv.split('=').map((v) => v.trim())))
    : (benchJson(text, '--compute-cpu-crowded').worker_cpu_ms as Record<string, unknown> | undefined);
  if (!given)
    throw invalid(
      `--compute-cpu-crowded ${text} holds no worker_cpu_ms; give the input-crowded line of bench/simulator-check.ts, or P=CPU-ms pairs like 1=190,8=230.`,
    );
  const out: Record<number, number> = {};
  for (const [k, v] of Object.entries(given)) {
    const peers = Number(k);
    const ms = Number(v);
    if (!Number.isInteger(peers) || peers < 1 || !(ms > 0))
      throw invalid(
        `--compute-cpu-crowded needs whole peer counts from 1 and positive CPU-ms, got ${JSON.stringify(k)}=${JSON.stringify(v)}.`,
      );
    out[peers] = ms;
  }
  return out;
}

/** The co-located model's inputs: flags, else the input-link line of bench/simulator-check.ts (--link-cpu FILE). */
function hostOptions(raw: Record<string, unknown>): HostOptions | undefined {
  if (raw.peersPerHost === undefined) return undefined;
  const p = Number(raw.peersPerHost);
  if (!Number.isInteger(p) || p < 1)
    throw invalid(`--peers-per-host must be a whole number from 1, got ${JSON.stringify(raw.peersPerHost)}.`);
  const link = raw.linkCpu ? benchJson(String(raw.linkCpu), '--link-cpu') : {};
  const need = (flag: string, v: unknown, from: string) => {
    if (v === undefined || v === null) throw invalid(`with --peers-per-host, simulate needs ${flag} (${from}).`);
    const x = Number(v);
    if (!Number.isFinite(x) || x < 0) throw invalid(`${flag} must be a number from 0, got ${JSON.stringify(v)}.`);
    return x;
  };
  const fromLink = 'or --link-cpu FILE: the input-link line of bench/simulator-check.ts';
  return {
    peersPerHost: p,
    coresPerHost: positive(raw.coresPerHost, '--cores-per-host'),
    computeCpuMs: positive(raw.computeCpuMs, '--compute-cpu-ms'),
    cpuMsPerMB: need('--cpu-ms-per-MB', raw.cpuMsPerMB ?? link.cpu_ms_per_MB, fromLink),
    cpuMsPerMessage: need('--cpu-ms-per-message', raw.cpuMsPerMessage ?? link.cpu_ms_per_message, fromLink),
    cpuMsPerCollective: need('--cpu-ms-per-collective', raw.cpuMsPerCollective ?? link.cpu_ms_per_collective, fromLink),
    smallCollectives: need('--small-collectives', raw.smallCollectives ?? 1, 'default 1'),
    computeCpuCrowdedMs: crowdedOption(raw.computeCpuCrowded),
  };
}

/** Options from the flags, bench files filling what the flags leave out (flags win). */
export function simulateOptions(raw: Record<string, unknown>): SimulateOptions {
  // Latency from the smallest message measured (its round trip is nearly all latency), bandwidth from the largest.
  const runs = (raw.allreduce === undefined ? [] : Array.isArray(raw.allreduce) ? raw.allreduce : [raw.allreduce]).map(
    (f) => benchJson(String(f), '--allreduce'),
  );
  runs.sort((a, b) => Number(a.bytes ?? 0) - Number(b.bytes ?? 0));
  const sig = raw.signaling ? benchJson(String(raw.signaling), '--signaling') : {};
  const rtt = runs[0]?.p2p_rtt_ms ?? undefined;
  const largest = runs.at(-1);
  const bw = largest ? (largest.p2p_bidir_MBps ?? largest.p2p_MBps ?? undefined) : undefined;
  const latency = raw.latencyMs ?? (rtt === undefined || rtt === null ? undefined : Number(rtt) / 2);
  const bandwidth = raw.bandwidthMBps ?? bw;
  if (raw.computeMs === undefined)
    throw invalid(
      'simulate needs --compute-ms: the compute time of one step on one peer (from ringtrain train --json: 1000 * batch / samples_per_s).',
    );
  if (raw.bytes === undefined)
    throw invalid('simulate needs --bytes: the gradient bytes per step (4 x parameters for float32, 2 x with --fp16).');
  if (latency === undefined)
    throw invalid(
      'simulate needs the link latency: --latency-ms, or --allreduce FILE (a ringtrain bench allreduce JSON line with p2p_rtt_ms).',
    );
  if (bandwidth === undefined || bandwidth === null)
    throw invalid(
      'simulate needs the link bandwidth: --bandwidth-MBps, or --allreduce FILE (with p2p_bidir_MBps or p2p_MBps).',
    );
  const relay = raw.relayPerS ?? sig.relayPerS;
  if (relay === undefined)
    throw invalid(
      'simulate needs the signaling relay capacity: --relay-per-s, or --signaling FILE (a bench:signaling JSON line with relayPerS).',
    );
  const peers = String(raw.peers ?? DEFAULT_PEERS.join(','))
    .split(',')
    .map((p) => Number(p.trim()));
  if (peers.some((p) => !Number.isInteger(p) || p < 1 || p > 1_000_000))
    throw invalid(`--peers must be whole numbers from 1, separated by commas, got ${JSON.stringify(raw.peers)}.`);
  const h = Number(raw.dilocoH ?? 16);
  if (!Number.isInteger(h) || h < 1)
    throw invalid(`--diloco-h must be a whole number from 1, got ${JSON.stringify(raw.dilocoH)}.`);
  const bytes = parseBytes(String(raw.bytes));
  return {
    computeMs: positive(raw.computeMs, '--compute-ms'),
    gradientBytes: bytes,
    latencyMs: Number(latency) >= 0 ? Number(latency) : positive(latency, '--latency-ms'),
    bandwidthMBps: positive(bandwidth, '--bandwidth-MBps'),
    relayPerS: positive(relay, '--relay-per-s'),
    signalsPerLink: positive(raw.signalsPerLink ?? 12, '--signals-per-link'),
    changesPerPeerHour: Number(raw.churn ?? 2),
    diLoCoH: h,
    groupSize: raw.groupSize === undefined ? undefined : positive(raw.groupSize, '--group-size'),
    peers,
    hosts: hostOptions(raw),
  };
}

export interface SimulationRow {
  peers: number;
  algorithms: Record<Algorithm, { stepsPerS: number; efficiency: number; bytesPerPeer: number; commMs: number }>;
  signaling: { changesPerS: number; signalsPerS: number; load: number; linksPerPeer: number };
  /** With --peers-per-host: the step when that many peers share a host's cores. */
  colocated?: { stepsPerS: number; bound: 'critical-path' | 'cpu'; cpuPerPeerMs: number; algorithm: string };
}

export function simulate(o: SimulateOptions): SimulationRow[] {
  const base: Omit<StepInputs, 'algorithm'> = {
    computeS: o.computeMs / 1000,
    gradientBytes: o.gradientBytes,
    alphaS: o.latencyMs / 1000,
    betaSPerByte: 1 / (o.bandwidthMBps * 1e6),
    diLoCoH: o.diLoCoH,
    groupSize: o.groupSize,
  };
  return o.peers.map((n) => {
    const algorithms = Object.fromEntries(
      ALGORITHMS.map((algorithm) => {
        const p = predictStep(n, { ...base, algorithm });
        return [
          algorithm,
          { stepsPerS: p.stepsPerS, efficiency: p.efficiency, bytesPerPeer: p.bytesPerPeer, commMs: p.commS * 1000 },
        ];
      }),
    ) as SimulationRow['algorithms'];
    const s = predictSignaling(n, {
      signalsPerLink: o.signalsPerLink,
      changesPerPeerHour: o.changesPerPeerHour,
      relayCapacityPerS: o.relayPerS,
    });
    const row: SimulationRow = {
      peers: n,
      algorithms,
      signaling: { changesPerS: s.changesPerS, signalsPerS: s.signalsPerS, load: s.load, linksPerPeer: s.linksPerPeer },
    };
    if (o.hosts) {
      const c = predictColocatedStep(n, hostInputs(o, o.hosts));
      row.colocated = {
        stepsPerS: c.stepsPerS,
        bound: c.bound,
        cpuPerPeerMs: c.cpuPerPeerS * 1000,
        algorithm: c.algorithm,
      };
    }
    return row;
  });
}

export function hostInputs(o: SimulateOptions, h: HostOptions): HostInputs {
  return {
    computeS: o.computeMs / 1000,
    computeCpuS: h.computeCpuMs / 1000,
    gradientBytes: o.gradientBytes,
    alphaS: o.latencyMs / 1000,
    betaSPerByte: 1 / (o.bandwidthMBps * 1e6),
    peersPerHost: h.peersPerHost,
    coresPerHost: h.coresPerHost,
    cpuPerByteS: h.cpuMsPerMB / 1e9,
    cpuPerMessageS: h.cpuMsPerMessage / 1000,
    cpuPerCollectiveS: h.cpuMsPerCollective / 1000,
    smallCollectives: h.smallCollectives,
    smallBytes: DEFAULT_SMALL_BYTES,
    mediumBytes: DEFAULT_MEDIUM_BYTES,
    computeCpuCrowded:
      h.computeCpuCrowdedMs &&
      Object.entries(h.computeCpuCrowdedMs).map(([peers, ms]) => ({ peers: Number(peers), cpuS: ms / 1000 })),
  };
}

const fmt = (x: number, digits = 2) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(digits));
const mb = (bytes: number) => fmt(bytes / 1e6);

/** A Markdown table: steps/s and efficiency per algorithm, bytes per peer, the server's load. */
export function simulationTable(rows: SimulationRow[], o: SimulateOptions): string {
  const head = `| N | ring steps/s (eff.) | recursive doubling | halving-doubling | hierarchical (g) | DiLoCo H=${o.diLoCoH} | MB sent per peer per step (ring / hier.) | signals/s at ${o.changesPerPeerHour} changes/peer/h | server load |`;
  const h = o.hosts;
  const hostHead = h
    ? ` ${h.peersPerHost} peer${h.peersPerHost === 1 ? '' : 's'} per host, ${h.coresPerHost} cores |`
    : '';
  const lines = [head + hostHead, `|${'---|'.repeat(h ? 10 : 9)}`];
  for (const r of rows) {
    const a = r.algorithms;
    const cell = (k: Algorithm) => `${fmt(a[k].stepsPerS)} (${Math.round(a[k].efficiency * 100)}%)`;
    const g = o.groupSize ?? defaultGroupSize(r.peers);
    lines.push(
      `| ${r.peers} | ${cell('ring')} | ${cell('recursive-doubling')} | ${cell('halving-doubling')} | ${cell('hierarchical')} g=${g} | ${cell('diloco')} | ${mb(a.ring.bytesPerPeer)} / ${mb(a.hierarchical.bytesPerPeer)} | ${fmt(r.signaling.signalsPerS)} | ${r.signaling.load < 0.01 ? '<1%' : `${Math.round(r.signaling.load * 100)}%`} |${r.colocated ? ` ${fmt(r.colocated.stepsPerS)} (${r.colocated.bound === 'cpu' ? 'CPU-bound' : 'critical path'}) |` : ''}`,
    );
  }
  return lines.join('\n');
}

export function simulateCommand(): Command {
  return new Command('simulate')
    .description(
      'predict steps/s, scaling efficiency, bytes per peer and signaling load at 2 … 1,024 peers from measured figures (alpha-beta model)',
    )
    .option('--compute-ms <ms>', 'compute time of one step on one peer')
    .option('--bytes <size>', 'gradient bytes per step, like 1.6MiB (4 x parameters; 2 x with --fp16)')
    .option(
      '--allreduce <file...>',
      'ringtrain bench allreduce JSON lines: latency = p2p_rtt_ms / 2 of the smallest run (give one of a few KiB), bandwidth = p2p_bidir_MBps of the largest',
    )
    .option('--latency-ms <ms>', 'one-way link latency (overrides --allreduce)')
    .option('--bandwidth-MBps <x>', 'per-direction link bandwidth in MB/s (overrides --allreduce)')
    .option('--signaling <file>', 'a bench:signaling JSON line: relay capacity = relayPerS')
    .option('--relay-per-s <n>', 'signals per second the server relays (overrides --signaling)')
    .option('--signals-per-link <n>', 'signals to set up one link: offer, answer, ICE candidates (default 12)')
    .option('--churn <n>', 'membership changes per peer per hour (default 2: a volunteer staying half an hour)')
    .option('--diloco-h <n>', 'DiLoCo: local steps between allreduces (default 16)')
    .option('--group-size <n>', 'hierarchical: peers per inner ring (default: power of two nearest sqrt N)')
    .option(
      '--peers-per-host <n>',
      'co-located peers: this many share one host (its cores bound the step: max(critical path, CPU work / cores))',
    )
    .option('--cores-per-host <n>', 'with --peers-per-host: the cores those peers get')
    .option(
      '--compute-cpu-ms <ms>',
      "with --peers-per-host: CPU-milliseconds of one step's compute on one peer, all its threads (bench/simulator-check.ts)",
    )
    .option(
      '--compute-cpu-crowded <pairs|file>',
      'with --peers-per-host: worker CPU-ms per step of one lone trainer when P run at once, as P=ms pairs (1=190,8=230) or the input-crowded line of bench/simulator-check.ts; interpolated linearly in P',
    )
    .option(
      '--link-cpu <file>',
      'with --peers-per-host: the input-link JSON line of bench/simulator-check.ts (CPU per MB, per message, per collective)',
    )
    .option('--cpu-ms-per-MB <x>', 'CPU-milliseconds per MB a peer sends or receives (overrides --link-cpu)')
    .option('--cpu-ms-per-message <x>', 'CPU-milliseconds per message a peer sends (overrides --link-cpu)')
    .option(
      '--cpu-ms-per-collective <x>',
      'CPU-milliseconds per collective call beyond its messages (overrides --link-cpu)',
    )
    .option(
      '--small-collectives <n>',
      "collectives of a few numbers per step besides the gradient allreduce (default 1: the step checks' sketches)",
    )
    .option('--peers <list>', `peer counts, comma-separated (default ${DEFAULT_PEERS.join(',')})`)
    .addOption(new Option('--json', 'print one JSON object instead of the table').default(false))
    .action(async (raw: Record<string, unknown>) => {
      const o = simulateOptions(raw);
      const rows = simulate(o);
      if (raw.json) await printLine(JSON.stringify({ inputs: o, rows }));
      else {
        if (o.hosts)
          await printLine(
            `co-located: ${o.hosts.peersPerHost} peer${o.hosts.peersPerHost === 1 ? '' : 's'} per host on ${o.hosts.coresPerHost} cores, ${o.hosts.computeCpuMs} CPU-ms of compute per step, ${o.hosts.cpuMsPerMB} CPU-ms per MB, ${o.hosts.cpuMsPerMessage} per message, ${o.hosts.cpuMsPerCollective} per collective`,
          );
        await printLine(
          `compute ${o.computeMs} ms/step, ${mb(o.gradientBytes)} MB of gradients, link ${o.latencyMs} ms one way and ${o.bandwidthMBps} MB/s, server relays ${o.relayPerS} signals/s`,
        );
        await printLine(simulationTable(rows, o));
      }
    });
}
