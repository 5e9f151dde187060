/**
 * Peers that share hosts: the alpha-beta step of cost-model.ts gives the
 * critical path (one peer's compute, then the allreduce's messages), but
 * when P peers share C cores of one host (on this project's test machines,
 * N software GPUs and N WebRTC stacks on 2 cores) the host cannot do more
 * than C CPU-seconds of work per second. So a step takes at least the CPU
 * work of the busiest host over its cores:
 *
 *   step = max(critical path,  min(P, N) x cpuPerPeer(N) / C)
 *   cpuPerPeer(N) = compute CPU(min(P, N)) + bytes sent and received x cpuPerByte
 *                   + messages x cpuPerMessage + collectives x cpuPerCollective
 *
 * Every input is measured, in CPU-seconds, on real peers
 * (bench/simulator-check.ts): compute from a lone peer's run, the link's
 * costs from two peers running the library's own allreduce over WebRTC.
 * A peer's compute costs more CPU when other peers share its host (caches,
 * memory bandwidth, each software adapter's threads taking turns), so
 * compute CPU(P) is measured too: P lone trainers started at once (no ring,
 * no traffic between them), each one's worker CPU-seconds per step, at a few
 * P (1, 2, 4, 8). Between measured P it is interpolated linearly; beyond the
 * largest it is held at that value (not extrapolated: measure up to the P you
 * ask about). The model adds the growth over P = 1, worker(P) - worker(1), to
 * the lone peer's whole-process CPU, so that the launcher's share stays one
 * peer's as before and P = 1 is the lone input unchanged.
 * With one peer per host this is the per-machine model, unless a peer's own
 * threads need more than its host's cores.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { autoAlgorithm } from '../collectives/allreduce.ts';
import { allreduceCost, predictStep, type LinkCost } from './cost-model.ts';

/** The algorithms the library's 'auto' chooses among. */
export type AutoAlgorithm = ReturnType<typeof autoAlgorithm>;

export interface HostInputs extends LinkCost {
  /** Wall seconds of one step on a peer alone (the critical path's compute). */
  computeS: number;
  /** CPU-seconds one peer spends on a step's compute, every thread counted (a software adapter spreads it over the cores). */
  computeCpuS: number;
  /**
   * Worker CPU-seconds per step of one lone trainer while `peers` lone trainers
   * run at once on the host, measured at a few P (one of them P = 1). Absent:
   * compute CPU does not grow with the peers on a host.
   */
  computeCpuCrowded?: readonly CrowdedCompute[];
  gradientBytes: number;
  /** Peers on one host (P) and the cores they get (C). */
  peersPerHost: number;
  coresPerHost: number;
  /** CPU-seconds per byte a peer sends or receives (SCTP, DTLS and the copies around them). */
  cpuPerByteS: number;
  /** CPU-seconds per message a peer sends, with the one it receives. */
  cpuPerMessageS: number;
  /** CPU-seconds per collective call beyond its messages (negotiation, bookkeeping). */
  cpuPerCollectiveS: number;
  /** Collectives of a few numbers a step runs besides the gradient allreduce (allgathers: N-1 messages each). */
  smallCollectives: number;
  /** Gradients of at most this many bytes go by recursive doubling, larger ones round the ring (the library's 'auto'). */
  smallBytes: number;
  /** Gradients above smallBytes and of at most this many go by halving-doubling (default: the library's DEFAULT_MEDIUM_BYTES). */
  mediumBytes?: number;
}

export interface CrowdedCompute {
  peers: number;
  cpuS: number;
}

export interface HostPrediction {
  peers: number;
  algorithm: AutoAlgorithm;
  /** Compute plus the allreduce's alpha-beta time. */
  criticalS: number;
  cpuPerPeerS: number;
  /** Of cpuPerPeerS: the compute's, at this many peers on the host. */
  computeCpuS: number;
  /** CPU work of the busiest host per step over its cores. */
  hostCpuS: number;
  stepS: number;
  stepsPerS: number;
  /** Which term set the step: the critical path or the host's cores. */
  bound: 'critical-path' | 'cpu';
}

/** Messages and bytes one peer sends in a step's gradient allreduce. */
export function allreduceTraffic(
  n: number,
  bytes: number,
  algorithm: AutoAlgorithm,
): { messages: number; bytesSent: number } {
  const { messages, bytesSent } = allreduceCost(algorithm, n, bytes, { alphaS: 0, betaSPerByte: 0 });
  return { messages, bytesSent };
}

export function predictColocatedStep(n: number, x: HostInputs): HostPrediction {
  const ok = (c: boolean, m: string) => {
    if (!c) throw new RingtrainError(ErrorCode.InvalidArgument, m);
  };
  ok(Number.isInteger(n) && n >= 1, `peers must be a whole number from 1, got ${n}.`);
  ok(
    Number.isInteger(x.peersPerHost) && x.peersPerHost >= 1,
    `peers per host must be a whole number from 1, got ${x.peersPerHost}.`,
  );
  ok(x.coresPerHost > 0, `cores per host must be positive, got ${x.coresPerHost}.`);
  ok(
    x.computeCpuS > 0,
    `compute CPU-seconds per step must be positive, got ${x.computeCpuS}; measure them with bench/simulator-check.ts.`,
  );
  ok(
    [x.cpuPerByteS, x.cpuPerMessageS, x.cpuPerCollectiveS, x.smallCollectives, x.smallBytes, x.mediumBytes ?? 0].every(
      (v) => v >= 0,
    ),
    'CPU costs per byte, message and collective, the small collectives, smallBytes and mediumBytes must not be negative.',
  );
  // The library's own rule for 'auto', so the model predicts the algorithm a real job runs.
  const algorithm = autoAlgorithm(x.gradientBytes, n, x.smallBytes, x.mediumBytes);
  const critical = predictStep(n, {
    computeS: x.computeS,
    gradientBytes: x.gradientBytes,
    alphaS: x.alphaS,
    betaSPerByte: x.betaSPerByte,
    algorithm,
  });
  const t = allreduceTraffic(n, x.gradientBytes, algorithm);
  const collectives = n > 1 ? 1 + x.smallCollectives : 0;
  const messages = t.messages + (n > 1 ? x.smallCollectives * (n - 1) : 0);
  const computeCpuS = x.computeCpuCrowded
    ? x.computeCpuS +
      crowdedCpuS(x.computeCpuCrowded, Math.min(x.peersPerHost, n)) -
      crowdedCpuS(x.computeCpuCrowded, 1)
    : x.computeCpuS;
  const cpuPerPeerS =
    computeCpuS + 2 * t.bytesSent * x.cpuPerByteS + messages * x.cpuPerMessageS + collectives * x.cpuPerCollectiveS;
  const hostCpuS = (Math.min(x.peersPerHost, n) * cpuPerPeerS) / x.coresPerHost;
  const stepS = Math.max(critical.stepS, hostCpuS);
  return {
    peers: n,
    algorithm,
    criticalS: critical.stepS,
    cpuPerPeerS,
    hostCpuS,
    stepS,
    stepsPerS: 1 / stepS,
    computeCpuS,
    bound: hostCpuS > critical.stepS ? 'cpu' : 'critical-path',
  };
}

/**
 * One peer's compute CPU with `peers` on its host, from the measured points:
 * linear between the two measured P around it, the last value beyond the
 * largest P measured. The points must include P = 1 (the lone peer).
 */
export function crowdedCpuS(points: readonly CrowdedCompute[], peers: number): number {
  const bad = (m: string) =>
    new RingtrainError(
      ErrorCode.InvalidArgument,
      `${m}; measure them with bench/simulator-check.ts (its input-crowded line).`,
    );
  if (!Number.isInteger(peers) || peers < 1)
    throw new RingtrainError(ErrorCode.InvalidArgument, `peers on a host must be a whole number from 1, got ${peers}.`);
  if (points.some((q) => !Number.isInteger(q.peers) || q.peers < 1 || !(q.cpuS > 0)))
    throw bad('crowded compute points need whole peer counts from 1 and positive CPU-seconds');
  const sorted = [...points].sort((a, b) => a.peers - b.peers);
  if (sorted.some((q, i) => i > 0 && q.peers === sorted[i - 1].peers))
    throw bad('crowded compute points list a peer count twice');
  if (sorted[0]?.peers !== 1) throw bad('crowded compute points must include 1 peer (the lone trainer)');
  const above = sorted.findIndex((q) => q.peers >= peers);
  if (above === -1) return sorted.at(-1)!.cpuS;
  const hi = sorted[above];
  if (hi.peers === peers) return hi.cpuS;
  const lo = sorted[above - 1];
  return lo.cpuS + ((hi.cpuS - lo.cpuS) * (peers - lo.peers)) / (hi.peers - lo.peers);
}

/**
 * The link's CPU costs from two peers' ring allreduces (bench/comm-cpu-peer.ts):
 * of one float (2 messages each way, no bytes to speak of), of `bytes` (the same
 * messages and `bytes` sent and received), and an allgather of one float (1 message).
 */
export function linkCpuCosts(m: {
  allreduceSmallCpuS: number;
  allreduceLargeCpuS: number;
  largeBytes: number;
  allgatherSmallCpuS: number;
}): { cpuPerByteS: number; cpuPerMessageS: number; cpuPerCollectiveS: number } {
  const cpuPerByteS = Math.max(0, (m.allreduceLargeCpuS - m.allreduceSmallCpuS) / (2 * m.largeBytes));
  // allreduce = c + 2m, allgather = c + m
  const cpuPerMessageS = Math.max(0, m.allreduceSmallCpuS - m.allgatherSmallCpuS);
  const cpuPerCollectiveS = Math.max(0, m.allgatherSmallCpuS - cpuPerMessageS);
  return { cpuPerByteS, cpuPerMessageS, cpuPerCollectiveS };
}
