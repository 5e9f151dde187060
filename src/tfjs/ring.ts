/**
 * Which ring a TF.js helper talks over. Horovod keeps one global ring set up
 * by hvd.init(); ringtrain/tfjs does the same (init() records its session
 * here), and every helper also takes an explicit `comm`, so that several
 * ranks can live in one process (tests, the page's teaching mode).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/communicator.ts';

/** A communicator, or anything that holds the current one (a Session: its ring changes after an elastic regroup). */
export type RingSource = Communicator | { readonly comm: Communicator };

let defaultRing: RingSource | null = null;

/** Makes `ring` the one used by helpers given no `comm` (init() calls this; null forgets it). */
export function setDefaultRing(ring: RingSource | null): void {
  defaultRing = ring;
}

/** What init() (or setDefaultRing) recorded, as given: a Session also carries its server connection. */
export function currentRingSource(): RingSource | null {
  return defaultRing;
}

function isCommunicator(r: RingSource): r is Communicator {
  return typeof (r as Communicator).send === 'function' && typeof (r as Communicator).rank === 'number';
}

/** The communicator to use now: the explicit one, else the one init() set up. */
export function resolveRing(explicit: RingSource | undefined, what: string): Communicator {
  const source = explicit ?? defaultRing;
  if (!source) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: no ring to talk over; call init() from ringtrain/tfjs first, or pass { comm }`,
    );
  }
  return isCommunicator(source) ? source : source.comm;
}
