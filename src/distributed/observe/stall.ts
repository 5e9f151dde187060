/**
 * The stall inspector's words: one line per 'stall' event, naming the ranks
 * this one waits on, for the worker's log and the launcher's output.
 */
import { QUIET_LINK } from '../../comm/communicator.ts';
import type { RingEvent } from '../../core/events.ts';

export type StallEvent = Pick<Extract<RingEvent, { type: 'stall' }>, 'rank' | 'name' | 'waitingFor' | 'waitedMs'>;

export function describeStall(e: StallEvent): string {
  const who = `rank${e.waitingFor.length === 1 ? '' : 's'} ${e.waitingFor.join(', ')}`;
  const secs = (e.waitedMs / 1000).toFixed(1);
  if (e.name === QUIET_LINK)
    return `stall: rank ${e.rank} has heard nothing from ${who} for ${secs} s (frozen, starved of CPU, or cut off); it is dropped if the silence goes on`;
  return `stall: rank ${e.rank} has waited ${secs} s for ${who} to submit '${e.name}' (slower than the others, stuck, or running different code)`;
}

/**
 * Says each stall once per `everyMs` for the same ranks: every rank of a ring
 * notices a silent peer, and negotiation repeats its warning while it waits.
 */
export function stallReporter(
  say: (line: string) => void,
  everyMs = 10_000,
  clock: () => number = Date.now,
): (e: StallEvent) => void {
  const last = new Map<string, number>();
  return (e) => {
    const key = `${e.name === QUIET_LINK ? 'quiet' : 'late'}:${e.waitingFor.join(',')}`;
    const t = clock();
    if (t - (last.get(key) ?? -Infinity) < everyMs) return;
    last.set(key, t);
    say(describeStall(e));
  };
}
