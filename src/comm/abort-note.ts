/**
 * The note an abort frame carries ({code, message, detail} as JSON), written
 * with the rank that started the abort, and read as what it is: text from
 * another machine. Only fields of the expected types are kept, the message is
 * bounded, and an unknown code reads as ERR_ABORTED.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export interface AbortNote {
  code: ErrorCode;
  message?: string;
  detail: Record<string, unknown>;
}

const MAX_MESSAGE_CHARS = 1000;

/**
 * The note rank `rank` sends when it aborts with `err`. `origin`: the rank whose abort started
 * it, kept as it is passed on, so a rank that starts aborts nobody else saw the reason for can
 * be named (session.ts).
 */
export function writeAbortNote(err: RingtrainError, rank: number): Uint8Array {
  const detail = { ...(err.detail ?? {}), origin: typeof err.detail?.origin === 'number' ? err.detail.origin : rank };
  return new TextEncoder().encode(JSON.stringify({ code: err.code, message: err.message, detail }));
}

export function readAbortNote(payload: Uint8Array): AbortNote {
  let p: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(payload));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) p = parsed as Record<string, unknown>;
  } catch {
    // not JSON: a note with nothing in it
  }
  const code =
    typeof p.code === 'string' && (Object.values(ErrorCode) as string[]).includes(p.code)
      ? (p.code as ErrorCode)
      : ErrorCode.Aborted;
  return {
    code,
    message: typeof p.message === 'string' ? p.message.slice(0, MAX_MESSAGE_CHARS) : undefined,
    detail:
      typeof p.detail === 'object' && p.detail !== null && !Array.isArray(p.detail)
        ? (p.detail as Record<string, unknown>)
        : {},
  };
}

/**
 * A peer speaks only for itself: an abort whose sender says, in its own name (no relayed
 * origin), that a third rank went away is a claim this rank can check, against the server:
 * if no one leaves the job within the server's liveness window, the claim was false and its
 * sender is reported (session.ts). Returns the claim, or null. A relayed claim is evidence
 * against no one: the relayer may have made up its origin.
 */
export function lossClaim(note: AbortNote, sender: number): string | null {
  const lost = note.detail.peer;
  const origin = note.detail.origin;
  if (note.code !== ErrorCode.PeerLost || typeof lost !== 'number' || lost === sender) return null;
  if (origin !== undefined && origin !== sender) return null;
  return `it aborted the ring saying rank ${lost} went away, and no one left the job`;
}

/** The error rank `rank` aborts with (and passes on) when `sender`'s abort `note` reaches it. */
export function relayedAbort(note: AbortNote, sender: number, rank: number): RingtrainError {
  const lost = note.detail.peer;
  // An abort said to come from this rank, which has not aborted: the sender made that up, so it is the sender's.
  const origin = typeof note.detail.origin === 'number' && note.detail.origin !== rank ? note.detail.origin : sender;
  const detail = { ...note.detail, rank, reportedBy: sender, origin };
  const message =
    note.code === ErrorCode.PeerLost && typeof lost === 'number'
      ? `rank ${lost} went away (reported by rank ${sender}); the collective was aborted on rank ${rank}. Rebuild the ring to go on`
      : `rank ${sender} aborted: ${note.message ?? 'no reason given'}`;
  return new RingtrainError(note.code, message, detail);
}
