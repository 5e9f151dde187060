/**
 * Messages over a byte stream (a TCP socket): each one is a u32 little-endian
 * length and that many bytes. A stream has no message boundaries of its own,
 * so the reader glues chunks until a message is whole, and refuses a length
 * beyond its cap before it buffers any of that message: a peer cannot make us
 * hold more than one capped message.
 */

export const LENGTH_BYTES = 4;
/** Alignment of every message handed out (the widest element a receiver views it as: f64). */
const ALIGN = 8;

/** The 4-byte length that goes in front of a message of `n` bytes. */
export function lengthPrefix(n: number): Uint8Array {
  const out = new Uint8Array(LENGTH_BYTES);
  new DataView(out.buffer).setUint32(0, n, true);
  return out;
}

/** A message longer than the reader's cap: the stream is not speaking our protocol. */
export class OversizedMessage extends Error {}

/**
 * Cuts a stream into messages. Feed it chunks in order; it calls the handler
 * once per whole message, in order. The handler and the cap may change
 * between messages (a handshake first, then frames), and take effect at the
 * next message.
 */
export class LengthPrefixedReader {
  /** Bytes of an unfinished message (or length), in arrival order. */
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** The length of the message being glued, once its prefix is in. */
  private expected = -1;

  constructor(
    public maxBytes: number,
    public handler: (message: Uint8Array) => void,
  ) {}

  /** Takes one chunk of the stream; throws OversizedMessage on a length past the cap. */
  push(chunk: Uint8Array): void {
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.expected < 0) {
        // The length prefix, possibly split across chunks.
        const need = LENGTH_BYTES - this.pendingBytes;
        const take = Math.min(need, chunk.byteLength - offset);
        this.keep(chunk.subarray(offset, offset + take));
        offset += take;
        if (this.pendingBytes < LENGTH_BYTES) return;
        const prefix = this.glue();
        const n = new DataView(prefix.buffer, prefix.byteOffset, LENGTH_BYTES).getUint32(0, true);
        if (n > this.maxBytes)
          throw new OversizedMessage(`a message of ${n} bytes announced; at most ${this.maxBytes} are allowed here`);
        this.expected = n;
      }
      const need = this.expected - this.pendingBytes;
      const available = chunk.byteLength - offset;
      if (this.pendingBytes === 0 && available >= need) {
        // Whole inside this chunk: hand out a view, no copy, if it starts where typed arrays may
        // (receivers view payloads as Float32Array/Int32Array/Float64Array); else a copy that does
        // (new Uint8Array(view) copies; a Node Buffer's slice() would not).
        const view = chunk.subarray(offset, offset + need);
        const message = (chunk.byteOffset + offset) % ALIGN === 0 ? view : new Uint8Array(view);
        offset += need;
        this.expected = -1;
        this.handler(message);
        continue;
      }
      const take = Math.min(need, available);
      this.keep(chunk.subarray(offset, offset + take));
      offset += take;
      if (this.pendingBytes < this.expected) return;
      const message = this.glue();
      this.expected = -1;
      this.handler(message);
    }
  }

  private keep(part: Uint8Array): void {
    if (part.byteLength === 0) return;
    this.pending.push(part);
    this.pendingBytes += part.byteLength;
  }

  /** The pending parts copied into one new array (they are views of chunks); empties the pending list. */
  private glue(): Uint8Array {
    const parts = this.pending;
    this.pending = [];
    const total = this.pendingBytes;
    this.pendingBytes = 0;
    const out = new Uint8Array(total);
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.byteLength;
    }
    return out;
  }
}

/**
 * Reused send buffers for a stream, each with room for the length prefix in front of its message,
 * so a message goes out as one write without a prefix array or a glued copy. A buffer is taken
 * while the sender fills it and comes back only when the socket says the kernel has its bytes
 * (the write callback): until then the socket still reads from it. Without reuse every 256 KiB
 * frame was a fresh array, and collecting them cost more CPU than the sums of an allreduce.
 */
export class PrefixedBufferPool {
  private free: ArrayBuffer[] = [];
  private readonly ours = new WeakSet<ArrayBuffer>();

  /** `messageBytes`: the largest message a buffer holds; `keep`: free buffers kept at most (the rest go to the collector). */
  constructor(
    private readonly messageBytes: number,
    private readonly keep: number,
  ) {}

  /** A buffer for a message of `bytes`: a view just past the room for its prefix. */
  take(bytes: number): Uint8Array {
    if (bytes > this.messageBytes) return new Uint8Array(bytes);
    let buffer = this.free.pop();
    if (!buffer) {
      buffer = new ArrayBuffer(LENGTH_BYTES + this.messageBytes);
      this.ours.add(buffer);
    }
    return new Uint8Array(buffer, LENGTH_BYTES, bytes);
  }

  /**
   * The message with its length written in front, as one view, when `message` came from take()
   * (else null: the caller sends prefix and message apart).
   */
  prefixed(message: Uint8Array): Uint8Array | null {
    const buffer = message.buffer;
    if (message.byteOffset !== LENGTH_BYTES || !this.ours.has(buffer as ArrayBuffer)) return null;
    new DataView(buffer, 0, LENGTH_BYTES).setUint32(0, message.byteLength, true);
    return new Uint8Array(buffer, 0, LENGTH_BYTES + message.byteLength);
  }

  /** Takes back a buffer whose bytes the stream no longer reads. */
  give(buffer: ArrayBufferLike): void {
    if (this.free.length < this.keep && this.ours.has(buffer as ArrayBuffer)) this.free.push(buffer as ArrayBuffer);
  }
}
