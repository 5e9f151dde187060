/**
 * The yardstick the TCP ring is held to (issue 34): a plain `node:net` stream over loopback from
 * rank 0 to rank 1 of a benchmark ring, in the same run, between the same two processes, with no
 * framing, tags, copies or sums: what this machine's TCP gives two processes. Rank 0 listens on a
 * free loopback port and tells rank 1 through the ring; rank 1 dials it and reads into one reused
 * buffer (as the links do), rank 0 writes the bytes, rank 1 answers one byte when it has them all. `rawTcpRing` is the same on every link of the ring at once.
 */
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Communicator } from '../../comm/interface.ts';
import { barrier } from '../../collectives/barrier.ts';
import { slowestOnRankZero } from '../../collectives/measure.ts';
import { now } from '../../core/events.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

/** One write's size: large, so the yardstick is the kernel's loopback and not JavaScript's calls. */
const WRITE_BYTES = 1 << 20;
/** What the reading end reads into, reused for every read (as the links' sockets do). */
const READ_BYTES = 256 * 1024;

/**
 * How the reading end of a yardstick reads: 'data-events' as a plain `node:net` stream does by default
 * (a fresh array per read: what issue 34 measured as "a plain Node TCP stream"), 'in-place' into one
 * reused buffer (`onread`), as the links read: the fastest plain stream.
 */
export type RawRead = 'data-events' | 'in-place';

/** Seconds rank 0 took to stream `bytes` to rank 1 and hear they arrived; null on the other ranks. Every rank calls it. */
export async function rawTcpStream(
  comm: Communicator,
  bytes: number,
  timeoutMs: number,
  read: RawRead = 'in-place',
): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2 || comm.rank > 1) return null;
  if (comm.rank === 1) {
    const said = await comm.recv(0, { id, step: 0, chunk: 0 }, timeoutMs);
    const { socket, done } = dialReading(readPort(said), bytes, read);
    await done;
    socket.end(new Uint8Array(1));
    return null;
  }
  const server = await listen();
  try {
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await comm.send(1, { id, step: 0, chunk: 0 }, portOf(server));
    const [socket] = await accepted;
    try {
      const t0 = now();
      await writeAll(socket, bytes);
      await once(socket, 'data');
      return (now() - t0) / 1000;
    } finally {
      socket.destroy();
    }
  } finally {
    server.close();
  }
}

/**
 * Every rank streams `bytes` by plain `node:net` to its right neighbour and receives as many from its
 * left, all at once: the ring's traffic with no framing, tags, copies or sums. Each rank listens and
 * tells its right neighbour where, which dials it to read; once every link is open (a barrier), each
 * sender times its stream until its receiver acknowledges the last byte. Seconds of the slowest link
 * on rank 0, null on the others. At two ranks it is a stream each way between them. Every rank calls it.
 */
export async function rawTcpRing(
  comm: Communicator,
  bytes: number,
  timeoutMs: number,
  read: RawRead = 'in-place',
): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2) return null;
  const right = (comm.rank + 1) % comm.size;
  const left = (comm.rank + comm.size - 1) % comm.size;
  const server = await listen();
  const sockets: Socket[] = [];
  try {
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await comm.send(right, { id, step: 0, chunk: 0 }, portOf(server));
    const said = await comm.recv(left, { id, step: 0, chunk: 0 }, timeoutMs);
    const fromLeft = dialReading(readPort(said), bytes, read);
    sockets.push(fromLeft.socket);
    await once(fromLeft.socket, 'connect');
    const [toRight] = await accepted;
    sockets.push(toRight);
    await barrier(comm, { timeoutMs });
    const t0 = now();
    const send = writeAll(toRight, bytes).then(() => once(toRight, 'data'));
    const receive = fromLeft.done.then(() => fromLeft.socket.end(new Uint8Array(1)));
    await Promise.all([send, receive]);
    return await slowestOnRankZero(comm, { id, step: 1, chunk: 0 }, (now() - t0) / 1000, comm.size, timeoutMs);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
}

/** A server on a free loopback port, listening. */
async function listen(): Promise<Server> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

/** The server's port as four little-endian bytes, to send through the ring. */
function portOf(server: Server): Uint8Array {
  const port = new Uint8Array(4);
  new DataView(port.buffer).setUint32(0, (server.address() as { port: number }).port, true);
  return port;
}

function readPort(said: Uint8Array): number {
  return new DataView(said.buffer, said.byteOffset, 4).getUint32(0, true);
}

/**
 * Dials a sender's port and counts what it streams, read as `read` says; `done` resolves once
 * `bytes` bytes came in, and rejects if the socket closes or fails first.
 */
export function dialReading(port: number, bytes: number, read: RawRead): { socket: Socket; done: Promise<void> } {
  let got = 0;
  let arrived = (): void => {};
  const count = (n: number): void => {
    got += n;
    if (got >= bytes) arrived();
  };
  const options = { host: '127.0.0.1', port, noDelay: true };
  const socket =
    read === 'in-place'
      ? createConnection({
          ...options,
          onread: { buffer: new Uint8Array(READ_BYTES), callback: (n) => (count(n), true) },
        })
      : createConnection(options).on('data', (chunk: Uint8Array) => count(chunk.byteLength));
  const done = new Promise<void>((resolve, reject) => {
    arrived = resolve;
    socket.on('error', reject);
    socket.on('close', () =>
      reject(new RingtrainError(ErrorCode.Transport, `raw TCP stream: closed after ${got} of ${bytes} bytes`)),
    );
  });
  return { socket, done };
}

/** Writes `bytes` bytes from one reused buffer, waiting for 'drain' whenever the socket says it is full. */
export async function writeAll(socket: Socket, bytes: number): Promise<void> {
  const block = new Uint8Array(Math.min(WRITE_BYTES, bytes));
  for (let sent = 0; sent < bytes; sent += block.byteLength) {
    const piece = block.subarray(0, Math.min(block.byteLength, bytes - sent));
    if (!socket.write(piece)) await once(socket, 'drain');
  }
}
