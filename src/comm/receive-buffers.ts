/**
 * Reused buffers for the messages a stream link receives. The link copies each message out of
 * the socket's chunks into one of these; a buffer comes back only when the message's receiver says
 * it is done with it (`Communicator.release`, through `Link.recycle`). So a message nobody gives
 * back is simply collected, and one a receiver holds while more arrive keeps its bytes.
 *
 * A buffer given back is detached from every view of it: its memory moves, without a copy, to a
 * new ArrayBuffer object that the next message gets. A receiver that kept a view past its release
 * then holds an empty array (a write through it, or a new view of it, throws): it can never read a
 * later message's bytes as its own. Without reuse every 256 KiB frame was a fresh array, and
 * collecting them was the largest single cost of a TCP allreduce.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** Moves `buffer`'s memory to a new ArrayBuffer and detaches `buffer` (and so every view of it). */
function detach(buffer: ArrayBuffer): ArrayBuffer {
  const transfer = (buffer as { transfer?: () => ArrayBuffer }).transfer;
  // ArrayBuffer.prototype.transfer (ES2024: Deno, Node 22+); structuredClone moves it the same way on Node 20.
  return transfer ? transfer.call(buffer) : structuredClone(buffer, { transfer: [buffer] });
}

/**
 * Arrays lent to a message's receiver, each given back once: what both links' receive memory
 * (this pool, and webrtc-buffers.ts's) keep to act only on their own arrays, and to refuse a
 * second release.
 */
export class LentArrays {
  /** Buffers holding a message a receiver has not given back yet. */
  private readonly lent = new WeakSet<ArrayBufferLike>();
  /** Buffers given back (now detached): giving one back again is a receiver's bug. */
  private readonly returned = new WeakSet<ArrayBufferLike>();

  lend(buffer: ArrayBufferLike): void {
    this.lent.add(buffer);
  }

  /** True when `buffer` was lent and is now back; false when it was never lent here; throws on a second release. */
  takeBack(buffer: ArrayBufferLike): boolean {
    if (!this.lent.has(buffer)) {
      if (this.returned.has(buffer))
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          'a received message was released twice; release a message once, when nothing reads it any more',
        );
      return false;
    }
    this.lent.delete(buffer);
    this.returned.add(buffer);
    return true;
  }
}

export class ReceiveBuffers {
  private free: ArrayBuffer[] = [];
  private readonly lent = new LentArrays();

  /**
   * `messageBytes`: the largest message a buffer holds; `keep`: free buffers kept at most (the rest
   * go to the collector); `smallest`: messages below this get an array of their own, so a short
   * one (a heartbeat) never ties up a whole buffer; `behind`: bytes of room each buffer has past
   * its largest message (a stream read in place puts the next message's length prefix there).
   */
  constructor(
    private readonly messageBytes: number,
    private readonly keep: number,
    private readonly smallest: number,
    private readonly behind = 0,
  ) {}

  /** An array of `bytes` for one message, starting at offset 0 of its buffer (so 8-byte aligned). */
  take(bytes: number): Uint8Array {
    if (bytes < this.smallest || bytes > this.messageBytes) return new Uint8Array(bytes);
    const buffer = this.free.pop() ?? new ArrayBuffer(this.messageBytes + this.behind);
    this.lent.lend(buffer);
    return new Uint8Array(buffer, 0, bytes);
  }

  /**
   * The receiver is done with `message` (or any view of the array take() gave): its buffer goes
   * back for the next message. An array that is not one of ours is left alone.
   */
  give(message: Uint8Array): void {
    const buffer = message.buffer;
    if (!this.lent.takeBack(buffer)) return;
    const moved = detach(buffer as ArrayBuffer);
    if (this.free.length < this.keep) this.free.push(moved);
  }
}
