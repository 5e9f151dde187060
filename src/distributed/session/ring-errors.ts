/**
 * How the trainer reads an error that ended a step: did the ring break (an
 * elastic ring re-forms), does it end the run as a result, who went away.
 */
import { ErrorCode, isRingtrainError, type RingtrainError } from '../../core/errors.ts';

export function lostRanksOf(err: RingtrainError): number[] {
  const d = err.detail ?? {};
  const out = new Set<number>();
  for (const v of [
    d.peer,
    d.lost,
    ...(Array.isArray(d.waitingFor) ? d.waitingFor : []),
    ...(Array.isArray(d.ranks) ? d.ranks : []),
  ]) {
    if (typeof v === 'number' && Number.isInteger(v)) out.add(v);
  }
  return [...out].sort((a, b) => a - b);
}

/** The ring broke under this rank (elastic training re-forms it). */
export function isBroken(err: unknown): err is RingtrainError {
  return (
    isRingtrainError(err) &&
    (err.code === ErrorCode.PeerLost ||
      err.code === ErrorCode.Timeout ||
      err.code === ErrorCode.Aborted ||
      err.code === ErrorCode.Transport ||
      err.code === ErrorCode.PeerMisbehaved)
  );
}

/** Errors that stop training as a result (stoppedBy) rather than a throw: the ring or its server went away. */
export function endsRun(err: unknown): err is RingtrainError {
  return isBroken(err) || isRingtrainError(err, ErrorCode.Signaling);
}
