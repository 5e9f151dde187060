/**
 * The seam between collectives and transports: what a collective may ask of
 * the ranks around it. Implemented by `LinkCommunicator` (links in a full
 * mesh) and by process sets (a subset of another communicator's ranks).
 */
import type { RingtrainError } from '../core/errors.ts';
import type { EventBus } from '../core/events.ts';

/** Which message a payload belongs to. Collectives name every message they send with one. */
export interface Tag {
  id: number;
  step: number;
  chunk: number;
}

/**
 * What collectives take: who I am, who else there is, and tagged, ordered
 * messages to and from every other rank. Collectives know nothing else of the
 * transport.
 */
export interface Communicator {
  readonly rank: number;
  readonly size: number;
  readonly events: EventBus;
  /** Queue `payload` (copied at once) for `peer`; resolves when it was handed to the transport. */
  send(peer: number, tag: Tag, payload: Uint8Array): Promise<void>;
  /**
   * Like send, without the copy where the link allows it: the transport reads `payload` where it
   * lies, so the caller leaves its bytes as they are until the returned promise resolves, and then
   * nothing reads them any more. Over a link that copies anyway it is send(), resolving once the
   * copy is queued. Optional: a communicator without it is used through send().
   */
  lend?(peer: number, tag: Tag, payload: Uint8Array): Promise<void>;
  /** The message `peer` sent with `tag`. Rejects with Timeout after `timeoutMs`, PeerLost if the peer goes. */
  recv(peer: number, tag: Tag, timeoutMs?: number): Promise<Uint8Array>;
  /**
   * The receiver is done with a message recv() gave it, and with every view of it (decoded
   * tensors included): the transport may fill its bytes with a later message. Until this is
   * called a message keeps its bytes however long it is held; a message never released is
   * simply collected. After it, views of it are empty (their buffer is detached), and releasing
   * it again throws. Optional: a communicator without it reuses nothing.
   */
  release?(peer: number, payload: Uint8Array): void;
  /**
   * A collective is about to receive up to `bytes` from `peer`: messages of it that arrive before
   * their receive count as a flood only beyond that (budget.ts). Until the returned function is called.
   * Optional: a communicator without a budget needs none.
   */
  expect?(peer: number, bytes: number): () => void;
  /**
   * Drops what collective `id` left behind for the steps `step` accepts: messages held here,
   * receives still waiting (they reject with Aborted, quietly: whoever made them has moved on)
   * and messages of those steps that arrive later. A collective that sent speculatively and
   * then changed course calls it, so its peers' speculative messages never pile up unread.
   * Optional: a communicator without it leaves such messages held.
   */
  forget?(id: number, step: (step: number) => boolean): void;
  /** The id of the next collective; every rank calls collectives in the same order, so ids agree. */
  nextId(): number;
  /** Fail everything pending here and on every other rank with `err`. */
  abort(err: RingtrainError): void;
  /** The error this communicator was aborted with, if any. */
  readonly error: RingtrainError | null;
  /**
   * Leave cleanly: pending receives fail at once, bytes already queued still
   * go out, then a goodbye that every peer acknowledges (so nothing sent
   * before it is lost), then the links close. Resolves when they have.
   */
  close(): Promise<void>;
  readonly stats: { bytesSent: number; bytesReceived: number };
}

/**
 * Sends `payload` to `peer` through `comm.lend` where the communicator has it, else through send
 * (which copies): either way the caller leaves the payload as it is until the promise resolves.
 */
export function lendOrSend(comm: Communicator, peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
  return comm.lend ? comm.lend(peer, tag, payload) : comm.send(peer, tag, payload);
}
