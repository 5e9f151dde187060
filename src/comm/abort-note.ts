/**
 * The note an abort frame carries ({code, message, detail} as JSON), read as
 * what it is: text from another machine. Only fields of the expected types
 * are kept, the message is bounded, and an unknown code reads as ERR_ABORTED.
 */
import { ErrorCode } from '../core/errors.ts';

export interface AbortNote {
  code: ErrorCode;
  message?: string;
  detail: Record<string, unknown>;
}

const MAX_MESSAGE_CHARS = 1000;

export function readAbortNote(payload: Uint8Array): AbortNote {
  let p: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(payload));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) p = parsed as Record<string, unknown>;
  } catch {
    // not JSON: a note with nothing in it
  }
  const code = typeof p.code === 'string' && (Object.values(ErrorCode) as string[]).includes(p.code) ? (p.code as ErrorCode) : ErrorCode.Aborted;
  return {
    code,
    message: typeof p.message === 'string' ? p.message.slice(0, MAX_MESSAGE_CHARS) : undefined,
    detail: typeof p.detail === 'object' && p.detail !== null && !Array.isArray(p.detail) ? (p.detail as Record<string, unknown>) : {},
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
