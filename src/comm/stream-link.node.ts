/**
 * A `Link` over connected, authenticated TCP sockets: each message is one
 * length-prefixed record (stream-frames.ts) of at most MAX_MESSAGE_BYTES, the
 * same frames a data channel carries. Backpressure is the socket's own: what
 * write() has not handed to the kernel is `bufferedAmount`, and `waitForRoom`
 * resolves on 'drain', so nothing piles up beyond the communicator's high-water mark.
 *
 * A plain TCP link is two sockets, one per direction, each dialled by the end that reads it: a
 * socket one dials reads into one reused buffer (`onread`), where an accepted one (Node gives it no
 * such option) reads each chunk into a fresh 64 KiB array, and collecting those was the largest
 * cost left of a TCP allreduce. A TLS link is one socket both ways, read by 'data' events.
 */
import type { Socket } from 'node:net';
import { setTimeout } from 'node:timers';
import { MAX_MESSAGE_BYTES } from './frame.ts';
import { LinkEnd, type Link } from './link.ts';
import { ReceiveBuffers } from './receive-buffers.ts';
import { LENGTH_BYTES, lengthPrefix, LengthPrefixedReader, PrefixedBufferPool } from './stream-frames.ts';

/** How long a closed link's last bytes may take to leave before the socket is destroyed (ms). */
const CLOSE_GRACE_MS = 2_000;
/**
 * Free send buffers a link keeps (4 MiB of 256 KiB frames, the communicator's high-water mark).
 * While a collective streams, buffers come back about as fast as frames are made, so few wait
 * free; between collectives these are what stays, and only they: the rest go to the collector.
 */
const KEPT_SEND_BUFFERS = 16;
/**
 * Free receive buffers a link keeps (32 MiB at most). A ring gives each message back as soon as it
 * has summed or copied it, but a rank that lost its core for a while comes back to a socket full of
 * them: at N = 4 on 2 cores, 230-370 were held at once. Keeping 16, half the messages of a 256 MiB
 * allreduce went to fresh zeroed arrays and then to the collector (7% and 12% of a rank's CPU);
 * keeping 128, busbw rose from 258-270 to 333-384 MB/s with no higher peak. A link keeps only
 * buffers it once had out at once, memory its collectives' peak already held.
 */
const KEPT_RECEIVE_BUFFERS = 128;
/** Messages below this (heartbeats, small collectives) get arrays of their own rather than a 256 KiB buffer. */
const SMALLEST_POOLED_MESSAGE = 64 * 1024;

/**
 * Where the bytes a socket receives go: `push` is what its reads call (its 'data' events, or the
 * `onread` callback of a socket this end dialled), `feed` says who takes them from now on (the
 * handshake, then the link).
 */
export class Inflow {
  private to: (chunk: Uint8Array) => void = () => {};
  private target: () => Uint8Array | null = () => null;

  /** `chunksReused`: the socket reads into one buffer, so a chunk is overwritten once `push` returns. */
  constructor(
    readonly socket: Socket,
    readonly chunksReused: boolean,
  ) {}

  /** The inflow of a socket read by 'data' events (an accepted socket, TLS). */
  static ofDataEvents(socket: Socket): Inflow {
    const inflow = new Inflow(socket, false);
    socket.on('data', (chunk: Uint8Array) => inflow.push(chunk));
    return inflow;
  }

  push(chunk: Uint8Array): void {
    this.to(chunk);
  }

  /**
   * `target`, for a socket that reads where it is told (`readBuffer`): where the next bytes may go
   * without a copy (the reader's readTarget), or null for the socket's own buffer.
   */
  feed(to: (chunk: Uint8Array) => void, target: () => Uint8Array | null = () => null): void {
    this.to = to;
    this.target = target;
  }

  /** Where a socket that reads into a buffer it is given each time reads next: the taker's target, else `own`. */
  readBuffer(own: Uint8Array): Uint8Array {
    return this.target() ?? own;
  }
}

/** A link's sockets: the one it reads, and the one it writes when that is another (a plain TCP link). */
export interface StreamSockets {
  read: Inflow;
  write?: Inflow;
}

export class StreamLink implements Link {
  /** 'tls' over an encrypted socket (`--link-tls`), else 'tcp'. */
  readonly transport: string;
  private readonly end = new LinkEnd();
  private readonly sendBuffers = new PrefixedBufferPool(MAX_MESSAGE_BYTES, KEPT_SEND_BUFFERS);
  private readonly receiveBuffers = new ReceiveBuffers(
    MAX_MESSAGE_BYTES,
    KEPT_RECEIVE_BUFFERS,
    SMALLEST_POOLED_MESSAGE,
    LENGTH_BYTES,
  );

  /** The socket this link writes to (its only one over TLS). */
  private readonly socket: Socket;
  private readonly sockets: Socket[];

  /**
   * `reader` is the handshake's on the read socket, already past the handshake: frames the far end
   * sent right behind its last handshake message may sit in it, and go on from there; `arrived`
   * holds those it already cut out while this link was being put together.
   */
  constructor(
    readonly peer: number,
    io: StreamSockets,
    reader: LengthPrefixedReader,
    arrived: Uint8Array[] = [],
  ) {
    const write = io.write ?? io.read;
    this.socket = write.socket;
    this.sockets = io.write ? [io.read.socket, io.write.socket] : [io.read.socket];
    this.transport = (this.socket as { encrypted?: boolean }).encrypted === true ? 'tls' : 'tcp';
    reader.maxBytes = MAX_MESSAGE_BYTES;
    reader.chunksReused = io.read.chunksReused;
    reader.handler = (m) => this.end.deliver(m);
    reader.allocate = (bytes) => this.receiveBuffers.take(bytes);
    for (const m of arrived) this.end.deliver(m);
    io.read.feed(
      (chunk) => {
        if (this.end.down) return;
        try {
          reader.push(chunk);
        } catch (e) {
          this.shut(new Error(`rank ${peer} broke the TCP framing: ${(e as Error).message}`));
        }
      },
      () => (this.end.down ? null : reader.readTarget()),
    );
    io.write?.feed(() =>
      this.shut(new Error(`rank ${peer} sent bytes on the socket that carries only this end's messages`)),
    );
    for (const socket of this.sockets) {
      socket.on('error', (e) => this.shut(e));
      socket.on('close', () => this.shut(new Error('TCP connection closed')));
    }
    // A socket may have closed while the other direction was still being dialled.
    if (this.sockets.some((socket) => socket.destroyed)) this.shut(new Error('TCP connection closed'));
  }

  send(message: Uint8Array): void {
    this.checkSendable(message.byteLength);
    const whole = this.sendBuffers.prefixed(message);
    if (whole) {
      // The socket reads the buffer until the kernel has it; only then may it be filled again.
      this.socket.write(whole, (err) => {
        if (!err) this.sendBuffers.give(whole.buffer);
      });
      return;
    }
    this.writeBehindLength([message]);
  }

  sendInPlace(head: Uint8Array, body: Uint8Array): Promise<void> {
    this.checkSendable(head.byteLength + body.byteLength);
    // The socket keeps a reference to `body` (no copy) until the kernel has its bytes, then calls
    // back; a socket destroyed before calls back with its error.
    return new Promise((resolve, reject) =>
      this.writeBehindLength([head, body], (err) => (err ? reject(err) : resolve())),
    );
  }

  /** Throws, as send() must, when the link is down or a message of `bytes` is over the frame cap. */
  private checkSendable(bytes: number): void {
    if (this.end.down || this.socket.destroyed) throw new Error(`TCP link to rank ${this.peer} is down`);
    if (bytes > MAX_MESSAGE_BYTES)
      throw new Error(`a ${bytes}-byte message is over the ${MAX_MESSAGE_BYTES}-byte frame cap`);
  }

  /**
   * One message, its length in front of `parts`, in one writev without gluing them into a new
   * buffer; `done` is called once the kernel has the last part.
   */
  private writeBehindLength(parts: Uint8Array[], done?: (err?: Error | null) => void): void {
    const bytes = parts.reduce((sum, p) => sum + p.byteLength, 0);
    this.socket.cork();
    this.socket.write(lengthPrefix(bytes));
    parts.forEach((p, i) => this.socket.write(p, i === parts.length - 1 ? done : undefined));
    this.socket.uncork();
  }

  messageBuffer(bytes: number): Uint8Array {
    return this.sendBuffers.take(bytes);
  }

  /** Takes back a message this link delivered (receive-buffers.ts): its buffer holds a later one. */
  recycle(message: Uint8Array): void {
    this.receiveBuffers.give(message);
  }

  bufferedAmount(): number {
    return this.end.down ? 0 : this.socket.writableLength;
  }

  /** Resolves once the socket has handed what it holds to the kernel ('drain'), the link went down, or `maxMs` passed. */
  waitForRoom(maxMs: number): Promise<void> {
    if (this.end.down || this.socket.writableLength === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, maxMs);
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  onMessage(handler: (m: Uint8Array) => void): void {
    this.end.onMessage(handler);
  }

  onClose(handler: (reason?: Error) => void): void {
    this.end.onClose(handler);
  }

  close(): void {
    // end() lets bytes already written go out first; the communicator's goodbye relies on that.
    // A peer that stopped reading (frozen, or its machine gone) never takes them, and TCP alone
    // never gives up on it: the socket would keep this process alive. So it gets a grace period.
    if (!this.end.down) {
      for (const socket of this.sockets) {
        socket.end();
        setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
      }
    }
    this.shut(undefined);
  }

  private shut(reason?: Error): void {
    if (this.end.down) return;
    if (reason) for (const socket of this.sockets) socket.destroy();
    this.end.shut(reason);
  }
}
