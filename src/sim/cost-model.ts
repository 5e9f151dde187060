/**
 * An alpha-beta model of one data-parallel training step at N peers, for
 * `ringtrain simulate`: what a step costs when every message pays a latency
 * alpha and every byte a time beta on its link (Hockney's model, as MPI and
 * gloo reason about algorithm choice). The step is compute plus the gradient
 * allreduce, not overlapped (ringtrain's step waits for its allreduce).
 *
 * Each allreduce algorithm the library runs states its own cost beside its code
 * (`cost` in src/collectives/algorithms/<name>.ts: the ring's 2(N-1) alpha + 2(N-1)/N n beta,
 * recursive doubling's, halving-doubling's, two-shot's, hierarchical's with its group size);
 * this file adds the one only simulated:
 *
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
export { defaultGroupSize, doublingRounds, hierarchicalCost } from '../collectives/algorithms/index.ts';

/** An allreduce algorithm's name (src/collectives/algorithms/), or the one only simulated: 'diloco'. */
export type Algorithm = 'diloco' | (string & {});

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

/**
 * The one table of what each algorithm costs: the step model, the co-located
 * model and the simulator's tables all read it. Algorithms the library runs
 * answer from their `cost` (src/collectives/algorithms/; `groupSize` is hierarchical's); DiLoCo
 * runs the ring, once every H steps (predictStep amortises it).
 */
export function allreduceCost(
  algorithm: Algorithm,
  n: number,
  bytes: number,
  link: LinkCost,
  groupSize?: number,
): AllreduceCost {
  if (algorithm === 'diloco') return ringCost(n, bytes, link);
  const runs = algorithmNamed(algorithm);
  check(
    runs !== undefined,
    `unknown algorithm '${algorithm}'; use one of ${[...algorithmChoices().slice(1), 'diloco'].join(', ')}.`,
  );
  return runs!.cost(n, bytes, link, groupSize);
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
