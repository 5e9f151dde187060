/**
 * An alpha-beta model of one data-parallel training step at N peers, for
 * `ringtrain simulate`: what a step costs when every message pays a latency
 * alpha and every byte a time beta on its link (Hockney's model, as MPI and
 * gloo reason about algorithm choice). The step is compute plus the gradient
 * allreduce, not overlapped (ringtrain's step waits for its allreduce).
 *
 * Each allreduce algorithm the library runs states its own cost beside its code
 * (`cost` in src/collectives/algorithms/<name>.ts: the ring's 2(N-1) alpha + 2(N-1)/N n beta,
 * recursive doubling's, halving-doubling's, two-shot's); this file adds the two only simulated:
 *
 *   hierarchical ring   rings of g inside, a ring of G = N/g groups between:
 *                       2(g-1) alpha + 2(g-1)/g n beta  +  2(G-1) alpha + 2(G-1)/G (n/g) beta
 *   DiLoCo with H       the ring's allreduce once every H steps (the rest are local)
 *
 * And the signaling server's load: every change of membership re-forms the
 * ring, and every pair of peers signals a new link (the transport is a full
 * mesh), so the signals per re-formation grow as N^2.
 */
import {
  algorithmChoices,
  algorithmNamed,
  ringCost,
  type AllreduceCost,
  type LinkCost,
} from '../collectives/algorithms/index.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export type { AllreduceCost, LinkCost };
export { doublingRounds } from '../collectives/algorithms/index.ts';

/** An allreduce algorithm's name (src/collectives/algorithms/), or one only simulated: 'hierarchical', 'diloco'. */
export type Algorithm = 'hierarchical' | 'diloco' | (string & {});

export interface StepInputs extends LinkCost {
  /** Seconds of compute per step on one peer (forward, backward, optimizer). */
  computeS: number;
  /** Gradient bytes allreduced per step. */
  gradientBytes: number;
  algorithm: Algorithm;
  /** Hierarchical: peers per inner ring (default: the power of two nearest sqrt N). */
  groupSize?: number;
  /** DiLoCo: local steps between two allreduces. */
  diLoCoH?: number;
}

export interface StepPrediction {
  peers: number;
  /** Seconds of communication per step (amortised over H for DiLoCo). */
  commS: number;
  stepS: number;
  stepsPerS: number;
  /** Throughput at N over N times the throughput of one peer alone (compute only). */
  efficiency: number;
  /** Bytes one peer sends per step (amortised for DiLoCo). */
  bytesPerPeer: number;
}

function check(cond: boolean, message: string): void {
  if (!cond) throw new RingtrainError(ErrorCode.InvalidArgument, message);
}

/** The power of two nearest sqrt(N), at least 2 (and at most N). */
export function defaultGroupSize(n: number): number {
  return Math.min(n, Math.max(2, 2 ** Math.round(Math.log2(Math.sqrt(n)))));
}

const NOTHING: AllreduceCost = { s: 0, bytesSent: 0, messages: 0 };

/** Reduce-scatter inside groups of g, a ring allreduce of the 1/g shards between groups, allgather inside. */
export function hierarchicalAllreduce(
  n: number,
  bytes: number,
  link: LinkCost,
  groupSize = defaultGroupSize(n),
): AllreduceCost {
  if (n <= 1) return NOTHING;
  const g = Math.min(groupSize, n);
  const groups = Math.ceil(n / g);
  const inner = ringCost(g, bytes, link);
  const outer = ringCost(groups, bytes / g, link);
  return {
    s: inner.s + outer.s,
    bytesSent: inner.bytesSent + outer.bytesSent,
    messages: inner.messages + outer.messages,
  };
}

/**
 * The one table of what each algorithm costs: the step model, the co-located
 * model and the simulator's tables all read it. Algorithms the library runs
 * answer from their `cost` (src/collectives/algorithms/); DiLoCo runs the ring,
 * once every H steps (predictStep amortises it).
 */
export function allreduceCost(
  algorithm: Algorithm,
  n: number,
  bytes: number,
  link: LinkCost,
  groupSize?: number,
): AllreduceCost {
  if (algorithm === 'hierarchical') return hierarchicalAllreduce(n, bytes, link, groupSize);
  if (algorithm === 'diloco') return ringCost(n, bytes, link);
  const runs = algorithmNamed(algorithm);
  check(
    runs !== undefined,
    `unknown algorithm '${algorithm}'; use one of ${[...algorithmChoices().slice(1), 'hierarchical', 'diloco'].join(', ')}.`,
  );
  return runs!.cost(n, bytes, link);
}

export function predictStep(n: number, x: StepInputs): StepPrediction {
  check(Number.isInteger(n) && n >= 1, `peers must be a whole number from 1, got ${n}.`);
  check(
    x.computeS > 0 && x.gradientBytes >= 0 && x.alphaS >= 0 && x.betaSPerByte >= 0,
    'compute time must be positive; bytes, latency and per-byte time not negative.',
  );
  const h = x.diLoCoH ?? 1;
  check(Number.isInteger(h) && h >= 1, `DiLoCo's H must be a whole number from 1, got ${h}.`);
  const c = allreduceCost(x.algorithm, n, x.gradientBytes, x, x.groupSize);
  const every = x.algorithm === 'diloco' ? h : 1;
  const commS = c.s / every;
  const stepS = x.computeS + commS;
  return {
    peers: n,
    commS,
    stepS,
    stepsPerS: 1 / stepS,
    efficiency: x.computeS / stepS,
    bytesPerPeer: c.bytesSent / every,
  };
}

export interface SignalingInputs {
  /** Signals one link costs to set up: offer, answer and each side's ICE candidates. */
  signalsPerLink: number;
  /** Membership changes per peer per hour (a volunteer who stays 30 minutes brings 2: a join and a leave). */
  changesPerPeerHour: number;
  /** Signals per second the server relays (bench:signaling's relayPerS). */
  relayCapacityPerS: number;
}

export interface SignalingPrediction {
  peers: number;
  /** Membership changes per second across the job. */
  changesPerS: number;
  /** Signals one re-formation costs: a link per pair of peers (full mesh). */
  signalsPerReform: number;
  signalsPerS: number;
  /** signalsPerS over the server's measured relay capacity: above 1 it saturates. */
  load: number;
  /** Connections each peer holds (full mesh). */
  linksPerPeer: number;
}

export function predictSignaling(n: number, s: SignalingInputs): SignalingPrediction {
  check(
    s.relayCapacityPerS > 0 && s.signalsPerLink > 0 && s.changesPerPeerHour >= 0,
    'relay capacity and signals per link must be positive, changes per hour not negative.',
  );
  const changesPerS = (n * s.changesPerPeerHour) / 3600;
  const signalsPerReform = ((n * (n - 1)) / 2) * s.signalsPerLink;
  const signalsPerS = changesPerS * signalsPerReform;
  return {
    peers: n,
    changesPerS,
    signalsPerReform,
    signalsPerS,
    load: signalsPerS / s.relayCapacityPerS,
    linksPerPeer: n - 1,
  };
}
