/**
 * Which of a job's settings do not combine, decided in one place.
 *
 * The same pairs are refused once wherever settings enter: the job settings'
 * schema (settings.ts) where the server adds a job and a peer reads it (naming
 * job keys), `ringtrain run` before anything starts (naming flags), and for
 * library callers who pass no schema, `trainDistributed` given a config made
 * by hand (src/distributed/train/train-config.ts) and `DistributedOptimizer` used
 * alone (naming config keys). Each door words the conflict for its own user;
 * what conflicts, and why, is written once here, in src/job, which the server,
 * the page and the peers all import.
 */
import type { Aggregation } from './setting-text.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** The settings that take part in a conflict. */
export type Setting = 'verify' | 'aggregation' | 'compression' | 'syncEvery' | 'balance' | 'doubtRule';

export interface ConflictSettings {
  /** The verified allreduce (`verify: true`, `run --verify`). */
  verify?: boolean;
  /** The aggregation rule; undefined or `mean` is the ring's sum. */
  aggregation?: Aggregation;
  /** Gradient compression on the wire: 'none' (or undefined), 'fp16', 'int8', 'topk'... */
  compression?: string;
  /** Local SGD's period (models averaged every few steps), when on. */
  syncEvery?: number;
  /** 'speed' gives peers uneven batch shares. */
  balance?: string;
  /** The doubt rule (doubt.ts) is on. */
  doubtRule?: boolean;
}

/** Two settings that do not combine, each with what it does that the other breaks. */
export interface Conflict {
  first: Setting;
  firstDoes: string;
  second: Setting;
  secondDoes: string;
}

/** The first conflict among the settings, or undefined when they all combine. */
export function settingConflict(s: ConflictSettings): Conflict | undefined {
  const robust = s.aggregation !== undefined && s.aggregation.rule !== 'mean';
  const lossy = (s.compression ?? 'none') !== 'none';
  if (s.verify && lossy)
    return {
      first: 'verify',
      firstDoes: 'checks that the sum is exact',
      second: 'compression',
      secondDoes: 'sends rounded gradients',
    };
  if (s.verify && robust)
    return { first: 'verify', firstDoes: 'checks a sum', second: 'aggregation', secondDoes: 'is not a sum' };
  if (robust && lossy)
    return {
      first: 'aggregation',
      firstDoes: "compares every peer's exact gradients",
      second: 'compression',
      secondDoes: 'sends rounded gradients',
    };
  // Local SGD averages how far replicas moved, not gradients.
  if (robust && s.syncEvery !== undefined)
    return {
      first: 'aggregation',
      firstDoes: 'combines gradients at every step',
      second: 'syncEvery',
      secondDoes: 'averages models every few steps',
    };
  // Speed shares pre-weigh each gradient by its share, which a median would not undo.
  if (robust && s.balance === 'speed')
    return {
      first: 'aggregation',
      firstDoes: "weighs every peer's gradient alike",
      second: 'balance',
      secondDoes: 'gives peers uneven shares',
    };
  // A peer with three times the examples sends about three times the norm, which the rule would clip as an outlier.
  if (s.doubtRule && s.balance === 'speed')
    return {
      first: 'doubtRule',
      firstDoes: "measures every peer's gradient against the others' at equal weight",
      second: 'balance',
      secondDoes: 'gives peers uneven shares',
    };
  return undefined;
}

/**
 * Throws the settings' first conflict as an InvalidArgument error, each setting
 * named by `name` (a flag for the CLI, a config key for the library).
 */
export function refuseConflicts(s: ConflictSettings, name: (setting: Setting) => string): void {
  const c = settingConflict(s);
  if (!c) return;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${name(c.first)} ${c.firstDoes}; ${name(c.second)} ${c.secondDoes}: drop one.`,
  );
}

/** How the library names a setting: its config key and value. */
export function configSettingName(s: ConflictSettings): (setting: Setting) => string {
  return (setting) => {
    if (setting === 'verify') return 'verify: true';
    if (setting === 'aggregation') return `aggregation '${s.aggregation?.rule}'`;
    if (setting === 'compression') return `compression '${s.compression}'`;
    if (setting === 'syncEvery') return `syncEvery ${s.syncEvery}`;
    if (setting === 'doubtRule') return 'the doubt rule (guard.doubt)';
    return `balance '${s.balance}'`;
  };
}
