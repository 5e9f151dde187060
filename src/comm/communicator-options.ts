/**
 * The knobs of a `LinkCommunicator` and their defaults, with the reason for
 * each default beside it. Kept apart from the communicator so that what can be
 * tuned (and what a test turns down to force a path) is on one page.
 */
import type { EventBus } from '../core/events.ts';
import { DEFAULT_BUDGET, type BudgetLimits } from './budget.ts';
import type { MisbehaviourSink } from './misbehaviour.ts';

export interface CommunicatorOptions {
  events?: EventBus;
  /** Told of every peer that breaks the rules here (framing, flooding): a session reports it to the server. */
  misbehaviour?: MisbehaviourSink;
  /** Send a heartbeat to a quiet peer this often (ms). */
  heartbeatMs?: number;
  /** A peer silent this long (ms) is lost; 0 turns heartbeats off (memory links report closes directly). */
  peerTimeoutMs?: number;
  /** Stop handing frames to a link while this many bytes wait in its buffer (4 MiB; libwebrtc's hard limit is 16 MiB). */
  highWaterBytes?: number;
  /** How often (ms) a blocked sender looks at bufferedAmount again. */
  pollMs?: number;
  /** What one peer may leave here unconsumed before it counts as flooding (budget.ts). */
  budget?: Partial<BudgetLimits>;
}

const DEFAULTS = {
  heartbeatMs: 500,
  // A peer that exits or crashes is reported at once (its link closes, the server sees its socket go);
  // this only catches one that is alive but silent. Software adapters compile shaders for seconds with
  // the event loop blocked, and 5 s dropped healthy peers on a loaded 2-core machine: 15 s does not.
  peerTimeoutMs: 15_000,
  highWaterBytes: 4 << 20,
  pollMs: 2,
};

export type CommunicatorSettings = typeof DEFAULTS;

/** The options given over the defaults (an option given as undefined keeps its default). */
export function withDefaults(options: CommunicatorOptions): { settings: CommunicatorSettings; budget: BudgetLimits } {
  const { budget, ...rest } = options;
  return {
    settings: { ...DEFAULTS, ...stripUndefined(rest) },
    budget: { ...DEFAULT_BUDGET, ...stripUndefined(budget ?? {}) },
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
