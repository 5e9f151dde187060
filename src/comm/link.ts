/**
 * A Link is one ordered, reliable, binary channel to one other rank. It knows
 * nothing of frames or collectives: the communicator does the framing, the
 * backpressure and the bookkeeping of who is still alive.
 */
export interface Link {
  /** The rank at the other end. */
  readonly peer: number;
  /** Queue one message (at most MAX_MESSAGE_BYTES). Throws if the link is closed. */
  send(message: Uint8Array): void;
  /** Bytes queued but not yet handed to the network: the sender polls this for backpressure. */
  bufferedAmount(): number;
  /**
   * Resolves when the buffer has drained, the link went down, or `maxMs` passed. Links whose
   * stack has an event that fires reliably give it (a TCP socket's 'drain'); the sender polls the others.
   */
  waitForRoom?(maxMs: number): Promise<void>;
  /** What carries the link ('tcp', 'webrtc'), for the timeline and `run --json`; absent for in-process links. */
  readonly transport?: string;
  /** Called for every message that arrives, in order. One handler per link. */
  onMessage(handler: (message: Uint8Array) => void): void;
  /** Called once when the link goes down, with the reason if it was an error. */
  onClose(handler: (reason?: Error) => void): void;
  /** Close the link; idempotent. The far end sees onClose. */
  close(): void;
}
