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
/**
 * A message shorter than this is read through the socket's own buffer with whatever follows it:
 * one read then takes many small messages, where reading each in place would take a read apiece.
 */
const IN_PLACE_MIN_BYTES = 16 * 1024;

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
  /**
   * Where a message that is not whole and aligned inside one chunk is copied to, given its
   * length once that is known (a link hands out its reused receive buffers: receive-buffers.ts).
   * What it returns must start where typed arrays may (8-byte aligned).
   */
  allocate: (bytes: number) => Uint8Array = (bytes) => new Uint8Array(bytes);
  /**
   * Whether the stream writes later bytes into the chunks it pushed (a socket that reads into one
   * reused buffer, `onread`): then every message is copied out, never handed out as a view.
   */
  chunksReused = false;
  /** The length prefix as it arrives (a chunk may end inside it). */
  private readonly prefix = new Uint8Array(LENGTH_BYTES);
  private prefixBytes = 0;
  /** The length of the message being read, once its prefix is in; -1 before. */
  private expected = -1;
  /** The message being copied together, once a chunk ended inside it, and how much of it is in. */
  private message: Uint8Array | null = null;
  private filled = 0;
  /** Where readTarget() last asked the stream to read, until a chunk comes from there. */
  private target: Uint8Array | null = null;
  /** Whether the last message was large: the next one likely is too, so its length is read on its own. */
  private lastLarge = false;

  constructor(
    public maxBytes: number,
    public handler: (message: Uint8Array) => void,
  ) {}

  /**
   * Where the stream's next bytes may go without a copy, for a socket that reads into whatever
   * buffer it is given (`onread` with a function): the rest of the message being read, and the next
   * message's length prefix behind it where the message's buffer has room; or, after a large
   * message, the next length prefix alone (a read of its own costs less than copying the message
   * that would come with it). Null: read into the socket's own buffer (small messages, many to a
   * read). The chunk read there must be pushed before this is asked again.
   */
  readTarget(): Uint8Array | null {
    this.target = null;
    if (this.expected < 0) {
      if (this.lastLarge) this.target = this.prefix.subarray(this.prefixBytes);
      return this.target;
    }
    if (this.expected < IN_PLACE_MIN_BYTES) return null;
    const m = (this.message ??= this.allocate(this.expected));
    const room = Math.min(m.buffer.byteLength - m.byteOffset, this.expected + LENGTH_BYTES) - this.filled;
    this.target = new Uint8Array(m.buffer, m.byteOffset + this.filled, room);
    return this.target;
  }

  /** Takes one chunk of the stream; throws OversizedMessage on a length past the cap. */
  push(chunk: Uint8Array): void {
    const target = this.target;
    this.target = null;
    // A length prefix read in place needs nothing special: readPrefix copies its bytes onto themselves.
    if (target && this.expected >= 0 && chunk.buffer === target.buffer && chunk.byteOffset === target.byteOffset)
      return this.pushInPlace(chunk);
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.expected < 0) {
        offset = this.readPrefix(chunk, offset);
        if (this.expected < 0) return;
      }
      const need = this.expected - this.filled;
      const available = chunk.byteLength - offset;
      if (!this.chunksReused && this.filled === 0 && available >= need && (chunk.byteOffset + offset) % ALIGN === 0) {
        // Whole inside this chunk where typed arrays may start (receivers view payloads as
        // Float32Array/Int32Array/Float64Array): handed out as a view, no copy.
        const view = chunk.subarray(offset, offset + need);
        offset += need;
        this.expected = -1;
        this.deliver(view);
        continue;
      }
      this.message ??= this.allocate(this.expected);
      const take = Math.min(need, available);
      this.message.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled < this.expected) return;
      const message = this.message;
      this.message = null;
      this.filled = 0;
      this.expected = -1;
      this.deliver(message);
    }
  }

  /**
   * A chunk the stream read where readTarget() said: the message's next bytes, already in place,
   * and at most a length prefix's worth of the next message behind them.
   */
  private pushInPlace(chunk: Uint8Array): void {
    const take = Math.min(chunk.byteLength, this.expected - this.filled);
    this.filled += take;
    if (this.filled < this.expected) return;
    const message = this.message!;
    this.message = null;
    this.filled = 0;
    this.expected = -1;
    // The next prefix's bytes are copied out of the message's buffer before the message is handed
    // on: its receiver may give the buffer back (and so detach it) at once.
    const next = take < chunk.byteLength ? new Uint8Array(chunk.subarray(take)) : null;
    this.deliver(message);
    if (next) this.readPrefix(next, 0);
  }

  private deliver(message: Uint8Array): void {
    this.lastLarge = message.byteLength >= IN_PLACE_MIN_BYTES;
    this.handler(message);
  }

  /** Reads (the rest of) a length prefix from `chunk` at `offset`; returns the offset past what it read. */
  private readPrefix(chunk: Uint8Array, offset: number): number {
    const take = Math.min(LENGTH_BYTES - this.prefixBytes, chunk.byteLength - offset);
    this.prefix.set(chunk.subarray(offset, offset + take), this.prefixBytes);
    this.prefixBytes += take;
    if (this.prefixBytes < LENGTH_BYTES) return offset + take;
    this.prefixBytes = 0;
    const n = new DataView(this.prefix.buffer).getUint32(0, true);
    if (n > this.maxBytes)
      throw new OversizedMessage(`a message of ${n} bytes announced; at most ${this.maxBytes} are allowed here`);
    this.expected = n;
    return offset + take;
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
