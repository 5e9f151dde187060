/**
 * Errors are values with a stable code, so callers (and tests) branch on the
 * code, never on the message. Every layer throws RingtrainError; the message
 * says what was wrong and what to do about it.
 */
export const ErrorCode = {
  /** Bad argument, shape or option given by the caller. */
  InvalidArgument: 'ERR_INVALID_ARGUMENT',
  /** No WebGPU adapter in this runtime. */
  NoAdapter: 'ERR_NO_ADAPTER',
  /** The GPU device was lost or raised an uncaptured error. */
  DeviceLost: 'ERR_DEVICE_LOST',
  /** A data file is missing or malformed. */
  BadData: 'ERR_BAD_DATA',
  /** A checkpoint is corrupt or belongs to another model. */
  BadCheckpoint: 'ERR_BAD_CHECKPOINT',
  /** Ranks disagreed on a collective's name, op, dtype or shape. */
  Mismatch: 'ERR_COLLECTIVE_MISMATCH',
  /** Some ranks never answered in time (the stall inspector names them). */
  Timeout: 'ERR_COLLECTIVE_TIMEOUT',
  /** A peer went away; the collective was aborted on every rank. */
  PeerLost: 'ERR_PEER_LOST',
  /** The communicator or transport was closed or aborted. */
  Aborted: 'ERR_ABORTED',
  /** A transport-level failure (WebRTC, data channel, framing). */
  Transport: 'ERR_TRANSPORT',
  /** The signaling server refused or dropped us. */
  Signaling: 'ERR_SIGNALING',
  /**
   * A peer broke the rules: a malformed frame, a flood of messages nobody asked for,
   * or a gradient that is not finite or far larger than the others'. `detail.peer` is its rank.
   */
  PeerMisbehaved: 'ERR_PEER_MISBEHAVED',
  /** The ranks' weights and optimizer state differ and no majority holds one state (src/distributed/robust/state-agreement.ts). */
  StateMismatch: 'ERR_STATE_MISMATCH',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class RingtrainError extends Error {
  readonly code: ErrorCode;
  /** Structured detail for programs (ranks, shapes, tensor names...). */
  readonly detail?: Record<string, unknown>;
  constructor(code: ErrorCode, message: string, detail?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RingtrainError';
    this.code = code;
    this.detail = detail;
  }
}

export function isRingtrainError(e: unknown, code?: ErrorCode): e is RingtrainError {
  return e instanceof RingtrainError && (code === undefined || e.code === code);
}

/** Why a file could not be read, for a message: 'no such file', or the system's code (a directory too, with `directories`). */
export function unreadableReason(err: unknown, directories = false): string {
  const code = (err as { code?: string }).code;
  if (code === 'ENOENT') return 'no such file';
  if (directories && code === 'EISDIR') return 'a directory';
  return code ?? String(err);
}
