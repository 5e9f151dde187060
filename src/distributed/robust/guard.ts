/**
 * The contribution guard: before a step's gradients are summed, every rank
 * publishes the L2 norm of its own contribution (one float per rank, a tiny
 * allgather) and every rank applies the same rule to the same numbers, so all
 * of them reach the same verdict without another round:
 *
 *  - a norm that is not finite (NaN, Infinity) names its rank, provided most
 *    ranks are finite (when most are not, the run diverged: no one to blame);
 *  - with at least MIN_RANKS_FOR_NORM_RULE finite norms, a norm above
 *    `ratio` × max(median, floor) names its rank. The median ignores up to
 *    half of the ranks being wrong; the floor keeps an honest run whose
 *    gradients all shrink towards zero from tripping on noise.
 *
 * Honest gradients of small batches are noisy: a CNN at 8 examples per peer
 * once showed one rank at 15× the median for one step. So a finite outlier
 * below SEVERE_RATIO × the median is only a strike: the step goes on with it
 * (its harm is bounded by that ratio), and the rank is named only if it is an
 * outlier again at the next step, as a rank that scales every gradient is.
 * Non-finite norms and norms beyond SEVERE_RATIO are named at once.
 *
 * Two strikes were not enough either: a CI run of the same CNN later saw one
 * honest rank at 50× the median two steps in a row. So by default the ratio is
 * SEVERE_RATIO itself (NaN, Infinity and 1e30-scaled gradients are caught; a
 * gradient scaled by 20 is not); a job that wants the tighter rule passes a
 * lower `ratio` and accepts that noisy honest ranks may be named.
 *
 * A verdict throws ERR_PEER_MISBEHAVED on every rank before anything was
 * summed, so the step applies no update: the model is unharmed, and elastic
 * training re-forms the ring without the rank named (see session.ts, which
 * asks the server to eject it) and redoes the step.
 *
 * What it cannot see: a rank that reports an honest norm but sends other
 * numbers into the ring (the verified allreduce is for that), and a rank
 * whose harm stays within `ratio` of the others (bounded harm by design).
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { allgather } from '../../collectives/allgather.ts';
import { median } from '../../core/stats.ts';

export interface GuardOptions {
  /** A norm above ratio × max(median, floor) is an outlier. Default SEVERE_RATIO (1,000): below it, honest small-batch norms overlap an attacker's (see below). */
  ratio?: number;
  /** Smallest median the ratio is taken against. Default 1e-6. */
  floor?: number;
  timeoutMs?: number;
}

/** An outlier this far beyond the median is named at once, without a second strike. */
export const SEVERE_RATIO = 1000;
export const DEFAULT_GUARD_RATIO = SEVERE_RATIO;
export const DEFAULT_GUARD_FLOOR = 1e-6;
/** With two finite norms there is no telling which one is wrong. */
export const MIN_RANKS_FOR_NORM_RULE = 3;

export interface Offence {
  rank: number;
  reason: string;
}

/** The ranks whose norm breaks the rule (same answer on every rank for the same norms). */
export function contributionOutliers(norms: ArrayLike<number>, options: GuardOptions = {}, typical = 0): Offence[] {
  const ratio = options.ratio ?? DEFAULT_GUARD_RATIO;
  const floor = options.floor ?? DEFAULT_GUARD_FLOOR;
  if (!(ratio > 1) || !(floor >= 0)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `guard ratio must be > 1 and floor >= 0, got ratio ${ratio}, floor ${floor}`,
    );
  }
  const all = Array.from(norms);
  const finite = all.filter(Number.isFinite);
  // Most ranks non-finite: the run diverged (a learning rate too high), which no ejection fixes.
  if (finite.length * 2 <= all.length) return [];
  const out: Offence[] = [];
  all.forEach((n, rank) => {
    if (!Number.isFinite(n)) out.push({ rank, reason: `its gradient is not finite (norm ${n})` });
  });
  if (finite.length >= MIN_RANKS_FOR_NORM_RULE) {
    const m = median(finite);
    const scale = Math.max(m, typical, floor);
    const limit = ratio * scale;
    const against =
      typical > m
        ? `the ring's recent typical norm ${typical.toExponential(3)} (median now ${m.toExponential(3)})`
        : `the median ${m.toExponential(3)}`;
    all.forEach((n, rank) => {
      if (Number.isFinite(n) && n > limit) {
        out.push({
          rank,
          reason: `its gradient norm ${n.toExponential(3)} is ${(n / scale).toExponential(2)}× ${against} (limit ${ratio}×)`,
        });
      }
    });
  }
  return out.sort((a, b) => a.rank - b.rank);
}

/** L2 norm in double precision (a 1e30-scaled float32 gradient squares past float32's range). */
export function l2Norm(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * x[i];
  return Math.sqrt(s);
}

/**
 * Checks this step's contributions across the ring; throws ERR_PEER_MISBEHAVED
 * naming the offending ranks (on every rank alike) or returns the norms.
 */
export async function checkContributions(
  comm: Communicator,
  local: Float32Array,
  step: number,
  options: GuardOptions = {},
  misbehaviour?: MisbehaviourSink,
): Promise<Float32Array> {
  // float32 carries norms up to 3.4e38; beyond that it reads Infinity, which the rule flags too.
  const norms = await allgather(comm, new Float32Array([l2Norm(local)]), {
    name: 'gradient-norms',
    timeoutMs: options.timeoutMs,
  });
  rejectOffences(comm, step, judgeNorms(comm, norms, step, options), norms, misbehaviour);
  return norms;
}

/** The norm rule's verdict on this step's norms, strikes included (same answer on every rank). */
export function judgeNorms(
  comm: Communicator,
  norms: Float32Array,
  step: number,
  options: GuardOptions = {},
): Offence[] {
  const typical = typicalNorms.get(comm);
  const outliers = contributionOutliers(norms, options, typical?.value ?? 0);
  const proven = provenOffences(comm, norms, step, outliers, options, typical?.value ?? 0);
  noteTypical(comm, norms, step, outliers);
  return proven;
}

/**
 * Per communicator, a slow average of each step's mean norm (outliers left out). Late in
 * training most ranks' batches are learned and the median norm collapses (1.5e-3 at step 823
 * of `npm start`'s CNN), while a rank whose batch holds one hard example still has a norm near 1:
 * against the median alone that read as 1,100x and two honest workers were ejected. The mean
 * carries those honest spikes, so the limit stays above them; an attacker's scaling is measured
 * against it too, and its own norm never enters it.
 */
const typicalNorms = new WeakMap<Communicator, { value: number; step: number }>();
const TYPICAL_DECAY = 0.9;

function noteTypical(comm: Communicator, norms: Float32Array, step: number, outliers: Offence[]): void {
  const flagged = new Set(outliers.map((o) => o.rank));
  const kept = Array.from(norms).filter((n, rank) => Number.isFinite(n) && !flagged.has(rank));
  if (kept.length === 0) return;
  const mean = kept.reduce((a, b) => a + b, 0) / kept.length;
  const t = typicalNorms.get(comm);
  // A redone step (same number) counts once.
  if (!t) typicalNorms.set(comm, { value: mean, step });
  else if (step > t.step) typicalNorms.set(comm, { value: TYPICAL_DECAY * t.value + (1 - TYPICAL_DECAY) * mean, step });
}

/**
 * Names the offenders (to `misbehaviour`, which reports them, and as event `peer-misbehaved`) and
 * throws ERR_PEER_MISBEHAVED; does nothing when there are none.
 */
export function rejectOffences(
  comm: Communicator,
  step: number,
  bad: Offence[],
  norms: ArrayLike<number>,
  misbehaviour?: MisbehaviourSink,
): void {
  if (bad.length === 0) return;
  for (const b of bad) {
    const reason = `step ${step}: ${b.reason}`;
    misbehaviour?.peerMisbehaved({ rank: comm.rank, peer: b.rank, reason });
    if (comm.events.active)
      comm.events.emit({ type: 'peer-misbehaved', t: now(), rank: comm.rank, peer: b.rank, reason });
  }
  const named = bad.map((b) => `rank ${b.rank} (${b.reason})`).join('; ');
  throw new RingtrainError(
    ErrorCode.PeerMisbehaved,
    `step ${step} was dropped, no update applied: ${named}. Elastic jobs eject it and go on; otherwise resume from the recovery checkpoint without it`,
    { peer: bad[0].rank, culprits: bad.map((b) => b.rank), step, norms: Array.from(norms) },
  );
}

/** Per communicator (a re-formed ring starts afresh), the last step at which each rank was a mild outlier. */
const strikes = new WeakMap<Communicator, Map<number, number>>();

/**
 * The offences to act on now: non-finite and severe ones at once, a mild outlier only when the
 * same rank was one at the previous step too. Every rank keeps the same record from the same
 * norms, so all reach the same verdict.
 */
function provenOffences(
  comm: Communicator,
  norms: Float32Array,
  step: number,
  outliers: Offence[],
  options: GuardOptions,
  typical: number,
): Offence[] {
  let record = strikes.get(comm);
  if (!record) strikes.set(comm, (record = new Map()));
  const finite = Array.from(norms).filter(Number.isFinite);
  const scale = Math.max(finite.length ? median(finite) : 0, typical, options.floor ?? DEFAULT_GUARD_FLOOR);
  const proven: Offence[] = [];
  for (const o of outliers) {
    const n = norms[o.rank];
    if (!Number.isFinite(n) || n > SEVERE_RATIO * scale) {
      proven.push(o);
      continue;
    }
    const last = record.get(o.rank);
    // A redone step keeps its number: a strike at this step or the one before counts.
    if (last !== undefined && last < step && last >= step - 1)
      proven.push({ ...o, reason: `${o.reason}, at steps ${last} and ${step}` });
    else if (last === undefined || last < step) record.set(o.rank, step);
  }
  for (const rank of record.keys()) if (!outliers.some((o) => o.rank === rank)) record.delete(rank);
  return proven;
}
