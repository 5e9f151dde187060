/**
 * The memory of a WebRTC link's messages. Every WebRTC stack copies a message when `send()` is
 * called (`@roamhq/wrtc` into a native buffer, browsers into theirs), so one send buffer serves
 * frame after frame. A received message is an array the stack made for it alone: once its receiver
 * gives it back (`Link.recycle`), detaching it with `ArrayBuffer.prototype.transfer(0)` drops its
 * memory at once instead of at the next collection.
 *
 * Node 20 has no `transfer`, and the arrays `@roamhq/wrtc` makes there cannot be detached any
 * other way (structuredClone copies them). They go only when V8 collects, and V8 looks at its
 * young generation's array bytes when JavaScript allocates an array: a link that allocates each
 * frame gives it that chance once per frame, one that reuses its frames never does, and the
 * received arrays then piled up to V8's 64 MB external-memory trigger (measured: peak 2.0-2.3x a
 * 64 MiB tensor with reused frames, 1.9-2.0x with fresh ones). So frames are reused only where
 * received messages can be freed.
 */
import { MAX_MESSAGE_BYTES } from './frame.ts';
import { LentArrays } from './receive-buffers.ts';

/**
 * Free send buffers a link keeps (4 MiB, the communicator's high-water mark). A send gives its
 * buffer back at once, so few are out at a time: the frames of messages queued but not yet sent.
 */
const KEPT_SEND_BUFFERS = 16;
/**
 * Frames below this (heartbeats, negotiation, small collectives) get arrays of their own: a link
 * of the mesh that carries only those then holds no 256 KiB buffer at all.
 */
const SMALLEST_POOLED_FRAME = 64 * 1024;

type Detachable = ArrayBuffer & { transfer?: (length?: number) => ArrayBuffer };

/** Whether this runtime can drop a received message's memory at once (ES2024 `transfer`: Deno, browsers, Node 22+). */
export const CAN_FREE_RECEIVED = typeof (ArrayBuffer.prototype as Detachable).transfer === 'function';

/** Buffers for frames, each back in the pool as soon as the stack has copied it. */
export class SendBuffers {
  private free: ArrayBuffer[] = [];
  private readonly ours = new WeakSet<ArrayBufferLike>();

  /** An array of `bytes` (at most MAX_MESSAGE_BYTES) to fill with one frame. */
  take(bytes: number): Uint8Array {
    if (bytes < SMALLEST_POOLED_FRAME || bytes > MAX_MESSAGE_BYTES) return new Uint8Array(bytes);
    let buffer = this.free.pop();
    if (!buffer) {
      buffer = new ArrayBuffer(MAX_MESSAGE_BYTES);
      this.ours.add(buffer);
    }
    return new Uint8Array(buffer, 0, bytes);
  }

  /** `frame` was sent (the stack holds its own copy): its buffer takes the next one. Arrays not from take() are left alone. */
  give(frame: Uint8Array): void {
    if (this.free.length < KEPT_SEND_BUFFERS && this.ours.has(frame.buffer))
      this.free.push(frame.buffer as ArrayBuffer);
  }
}

/** The messages a link delivered and not yet got back, so that it frees only its own, once. */
export class ReceivedMessages {
  private readonly held = new LentArrays();

  /** `message` is delivered: the array under it is the stack's, made for it alone. */
  deliver(message: Uint8Array): void {
    this.held.lend(message.buffer);
  }

  /**
   * The receiver is done with `message` (or any view of its array): its memory goes now, and every
   * view of it reads as empty. A second release is the receiver's bug; arrays not delivered here are left alone.
   */
  free(message: Uint8Array): void {
    const buffer = message.buffer;
    if (!this.held.takeBack(buffer)) return;
    try {
      (buffer as Detachable).transfer!(0);
    } catch {
      // An array its runtime will not detach (none seen) is left to the collector, as on Node 20.
    }
  }
}
