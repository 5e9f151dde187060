/**
 * The admission probes one peer answers (admission-probe.ts), beside training and never in its
 * way: the server hands a probe over on its socket and the step loop never awaits one. At most
 * MAX_OPEN_PROBES are open at once, so joiners that never answer (ghosts, each held to the job's
 * admitTimeoutMs) cost a member a bounded number of half-open links whatever the server admits as
 * candidates. The rest wait their turn with what is left of their deadline, which runs from the
 * moment the queue took the probe (on a member, as the server handed it over, when the server's
 * clock for the candidate started too); one whose deadline passed while it waited ends without
 * opening anything (the server drops its candidate then).
 * Each probe is told to the event bus as it opens and as it ends ('admission-probe').
 */
import { now, type EventBus } from '../../core/events.ts';
import type { ProbeMsg } from '../../signaling/protocol.ts';
import type { ProbeOutcome } from './admission-probe.ts';

/**
 * Probes one peer answers at once: as many as the server's default candidate limit (8 per job)
 * can ask of one member, so under the defaults no probe waits (a cap below it would let a few
 * ghosts hold every slot while an honest joiner's deadline runs out in the queue); a server that
 * admits more candidates cannot make a member hold more links than this.
 */
export const MAX_OPEN_PROBES = 8;

export interface ProbeQueueOptions {
  /** Opens probe `p`'s link and echoes within `deadlineMs`; never throws. */
  answer: (p: ProbeMsg, deadlineMs: number) => Promise<ProbeOutcome>;
  /** Gives up probe `p` without opening anything (its signals are no longer kept). */
  skip: (p: ProbeMsg) => void;
  events: EventBus;
  /** This peer's rank in its ring, or -1 while it is a candidate itself. */
  rank: () => number;
  maxOpen?: number;
}

interface Waiting {
  p: ProbeMsg;
  /** When the probe's deadline passes (now() clock). */
  until: number;
}

export class ProbeQueue {
  private open = 0;
  private readonly waiting: Waiting[] = [];
  private readonly maxOpen: number;

  constructor(private readonly o: ProbeQueueOptions) {
    this.maxOpen = o.maxOpen ?? MAX_OPEN_PROBES;
  }

  /** Probes open now (at most maxOpen). */
  get opened(): number {
    return this.open;
  }

  /** Takes probe `p` that arrived now, with `deadlineMs` from now to prove the link; returns at once. */
  add(p: ProbeMsg, deadlineMs: number): void {
    this.waiting.push({ p, until: now() + deadlineMs });
    this.next();
  }

  private next(): void {
    while (this.open < this.maxOpen && this.waiting.length > 0) {
      const { p, until } = this.waiting.shift()!;
      const left = until - now();
      if (left <= 0) {
        this.o.skip(p);
        this.tell(p, 'end', { ok: false, reason: 'its deadline passed while other probes were open' });
        continue;
      }
      this.open++;
      this.tell(p, 'begin');
      void this.o.answer(p, left).then((outcome) => {
        this.open--;
        this.tell(p, 'end', outcome);
        this.next();
      });
    }
  }

  private tell(p: ProbeMsg, phase: 'begin' | 'end', outcome?: ProbeOutcome): void {
    this.o.events.emit({
      type: 'admission-probe',
      t: now(),
      rank: this.o.rank(),
      probe: p.probe,
      side: p.side,
      peer: p.peer.name ?? p.peer.peerId,
      phase,
      ...(outcome ? { ok: outcome.ok } : {}),
      ...(outcome?.reason ? { reason: outcome.reason } : {}),
    });
  }
}
