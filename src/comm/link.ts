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
  /**
   * A buffer of `bytes` (at most MAX_MESSAGE_BYTES) for the sender to fill with one message and
   * hand to send(), which takes it back for reuse once the transport is done with it. Links that
   * keep no buffers of their own leave it out; senders then allocate each message.
   */
  messageBuffer?(bytes: number): Uint8Array;
  /**
   * Queue one message made of `head` then `body` (together at most MAX_MESSAGE_BYTES) without
   * copying `body`: the link reads it where it lies, so its bytes must stay as they are until the
   * returned promise resolves, once the transport holds no reference to them (a socket's kernel has
   * them). It rejects if the link goes down first; throws, as send() does, if it is down already.
   * Links whose stack copies every message anyway (a data channel) leave it out.
   */
  sendInPlace?(head: Uint8Array, body: Uint8Array): Promise<void>;
  /** Bytes queued but not yet handed to the network: the sender polls this for backpressure. */
  bufferedAmount(): number;
  /**
   * Resolves when the buffer has drained, the link went down, or `maxMs` passed. Links whose
   * stack has an event that fires reliably give it (a TCP socket's 'drain'); the sender polls the others.
   */
  waitForRoom?(maxMs: number): Promise<void>;
  /** What carries the link ('tcp', 'webrtc'), for the timeline and `run --json`; absent for in-process links. */
  readonly transport?: string;
  /**
   * Takes back a message this link delivered, once its receiver is done with it and every view
   * of it: the link may fill its buffer with a later message, or free it. Links that keep no receive
   * buffers leave it out. A link that reuses or frees what it takes back detaches it, so a view kept
   * past this reads nothing rather than another message's bytes.
   */
  recycle?(message: Uint8Array): void;
  /** Called for every message that arrives, in order. One handler per link. */
  onMessage(handler: (message: Uint8Array) => void): void;
  /** Called once when the link goes down, with the reason if it was an error. */
  onClose(handler: (reason?: Error) => void): void;
  /** Close the link; idempotent. The far end sees onClose. */
  close(): void;
}

/**
 * The receiving side every transport's `Link` shares. Messages that arrive before anyone
 * listens wait (a fast peer may start sending while this end still connects to others), and a
 * close handler registered after the link went down still hears why.
 */
export class LinkEnd {
  private handler: ((m: Uint8Array) => void) | null = null;
  private early: Uint8Array[] = [];
  private closeHandlers: ((reason?: Error) => void)[] = [];
  private reason?: Error;
  private isDown = false;

  get down(): boolean {
    return this.isDown;
  }

  deliver(m: Uint8Array): void {
    if (this.handler) this.handler(m);
    else this.early.push(m);
  }

  onMessage(handler: (m: Uint8Array) => void): void {
    this.handler = handler;
    const early = this.early;
    this.early = [];
    for (const m of early) handler(m);
  }

  onClose(handler: (reason?: Error) => void): void {
    if (this.isDown) handler(this.reason);
    else this.closeHandlers.push(handler);
  }

  /** Marks the link down and tells the close handlers, once; false if it was down already. */
  shut(reason?: Error): boolean {
    if (this.isDown) return false;
    this.isDown = true;
    this.reason = reason;
    for (const h of this.closeHandlers) h(reason);
    return true;
  }
}
