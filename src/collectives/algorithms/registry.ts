/**
 * The allreduce algorithms, as Horovod's OperationManager holds its implementations: an ordered
 * list, each algorithm one file here that calls `defineAllreduceAlgorithm` with whether it suits a
 * reduction (`enabled`), how it runs (`run`) and what it costs (`cost`, the alpha-beta model
 * `ringtrain simulate` reads). `auto` takes the first enabled one in `order`; the ring, enabled for
 * everything, comes last. Each algorithm gets its wire phase (the high bits of its messages' tags)
 * from here, so no two collide and nobody picks a number by hand.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { finish, scaleInPlace } from '../codecs/reduce.ts';
import type { Run } from '../controller/run.ts';
import type { ReduceOp, ReduceSettings, Tensor } from '../codecs/types.ts';
import { codecFor, type Codec } from '../codecs/wire.ts';

/** Seconds per message and per byte of a link (Hockney's alpha-beta model). */
export interface LinkCost {
  /** Seconds per message (one-way latency, half a round trip). */
  alphaS: number;
  /** Seconds per byte (1 / per-direction bandwidth). */
  betaSPerByte: number;
}

/** What one peer pays for one allreduce: seconds, bytes sent, and messages sent. */
export interface AllreduceCost {
  s: number;
  bytesSent: number;
  messages: number;
}

/** What `enabled` decides on: the same on every rank (negotiation checks the choice). */
export interface AllreduceShape {
  bytes: number;
  size: number;
  /** ReduceOptions.smallBytes and mediumBytes, the sizes 'auto' switches at. */
  smallBytes: number;
  mediumBytes: number;
  /** ReduceOptions.groups as lists of ranks (hierarchical.ts, rankGroups), when the caller gave them. */
  groups?: number[][];
}

export interface AllreduceAlgorithm {
  /** ReduceOptions.algorithm, the negotiated choice, the phase in events and the timeline. */
  name: string;
  /** Place in the list 'auto' walks: lower first. */
  order: number;
  /**
   * Sends each position once per rank along the ring's path: then lossy compression with error
   * feedback (the residual must see each position once) and an observed (verified) reduction
   * (checked along that path) may use it. Only the ring does.
   */
  ringPath?: boolean;
  /** Whether 'auto' picks it for this reduction (the ones before it in `order` declined). */
  enabled(shape: AllreduceShape): boolean;
  /**
   * Reduces `buf` in place over every rank of `run.comm` (more than one), prescale to postscale and
   * average included (`finish` in reduce.ts); `phase` is its wire phase, for `run.tag(phase, …)`.
   */
  run(run: Run, buf: Tensor, s: ReduceSettings, phase: number): Promise<void>;
  /** The alpha-beta model of one allreduce of `bytes` on `n` peers; `groupSize`: ranks per group, for one that groups them. */
  cost(n: number, bytes: number, link: LinkCost, groupSize?: number): AllreduceCost;
  /**
   * Whether an allreduce of `count` elements may go ahead on its cached agreement (run.ts): every
   * rank's result must need every rank's data. Default: any element does it.
   */
  mayGoAhead?(count: number, size: number): boolean;
  /** Whether it may write into `buf` (or the residual) before every rank has gone ahead (default true): then a fallback needs a snapshot. */
  writesEarly?(s: ReduceSettings): boolean;
}

/** Phases 1-4 are the ring's reduce-scatter and allgather, broadcast and alltoall (ring.ts); the algorithms' follow. */
const FIRST_PHASE = 5;

const algorithms: AllreduceAlgorithm[] = [];

/** Adds an algorithm to the list 'auto' walks; a second one under a taken name or order is refused. */
export function defineAllreduceAlgorithm(algorithm: AllreduceAlgorithm): AllreduceAlgorithm {
  const clash = algorithms.find((a) => a.name === algorithm.name || a.order === algorithm.order);
  if (clash && clash !== algorithm)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `defineAllreduceAlgorithm('${algorithm.name}'): '${clash.name}' already has ${clash.name === algorithm.name ? 'this name' : `order ${clash.order}`}; pick another`,
    );
  if (algorithm.name === 'auto')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      "defineAllreduceAlgorithm: 'auto' is the choice, not an algorithm",
    );
  if (!clash) algorithms.push(algorithm);
  algorithms.sort((a, b) => a.order - b.order);
  return algorithm;
}

/** The algorithms in the order 'auto' walks them. */
export function allreduceAlgorithms(): readonly AllreduceAlgorithm[] {
  return algorithms;
}

/** The names ReduceOptions.algorithm takes: 'auto' and every algorithm's. */
export function algorithmChoices(): string[] {
  return ['auto', ...algorithms.map((a) => a.name)];
}

export function algorithmNamed(name: string): AllreduceAlgorithm | undefined {
  return algorithms.find((a) => a.name === name);
}

/**
 * The algorithm's wire phase: its place in the list after the fixed ones. Every rank runs the same
 * list, and a rank that knew another algorithm set would fail negotiation first (it names its choice).
 */
export function phaseOf(algorithm: AllreduceAlgorithm): number {
  return FIRST_PHASE + algorithms.indexOf(algorithm);
}

/**
 * 'auto': the first algorithm in order that `enabled` accepts, among those on the ring's path
 * when the reduction needs it (`ringPath`). The ring accepts everything, so there always is one.
 */
export function firstEnabled(shape: AllreduceShape, needsRingPath: boolean): AllreduceAlgorithm {
  const found = algorithms.find((a) => (!needsRingPath || a.ringPath) && a.enabled(shape));
  if (!found)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `no allreduce algorithm is enabled for ${shape.bytes} bytes on ${shape.size} ranks (${algorithms.map((a) => a.name).join(', ')})`,
    );
  return found;
}

/** What an algorithm that moves the whole (prescaled, encoded) buffer itself runs: `done` finishes a reduced block. */
export type BufferAlgorithm = (
  run: Run,
  buf: Tensor,
  op: ReduceOp,
  codec: Codec,
  done: (t: Tensor) => void,
  phase: number,
) => Promise<void>;

/**
 * An algorithm's `run` from its data movement: prescale first, the compression's codec, `finish`
 * on every fully reduced block, and its messages' events under a phase named as the algorithm.
 */
export function bufferRun(name: string, body: BufferAlgorithm): AllreduceAlgorithm['run'] {
  return (run, buf, s, phase) => {
    scaleInPlace(buf, s.prescale);
    const codec = codecFor(s.compression, buf);
    const done = (t: Tensor) => finish(t, s, run.comm.size);
    return run.phase(name, () => body(run, buf, s.op, codec, done, phase));
  };
}
