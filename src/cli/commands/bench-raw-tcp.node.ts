/**
 * The yardstick the TCP ring is held to (issue 34): a plain `node:net` stream over loopback from
 * rank 0 to rank 1 of a benchmark ring, in the same run, between the same two processes, with no
 * framing, tags, copies or sums: what this machine's TCP gives two processes. Rank 1 listens on a
 * free loopback port and tells rank 0 through the ring; rank 0 writes the bytes, rank 1 answers
 * one byte when it has them all. `rawTcpRing` is the same on every link of the ring at once.
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

/** Seconds rank 0 took to stream `bytes` to rank 1 and hear they arrived; null on the other ranks. Every rank calls it. */
export async function rawTcpStream(comm: Communicator, bytes: number, timeoutMs: number): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2 || comm.rank > 1) return null;
  if (comm.rank === 1) {
    await receiveStream(comm, id, bytes);
    return null;
  }
  const said = await comm.recv(1, { id, step: 0, chunk: 0 }, timeoutMs);
  const socket = createConnection({ host: '127.0.0.1', port: readPort(said), noDelay: true });
  await once(socket, 'connect');
  try {
    const t0 = now();
    await writeAll(socket, bytes);
    await once(socket, 'data');
    return (now() - t0) / 1000;
  } finally {
    socket.destroy();
  }
}

/** Rank 1: listens, says where through the ring, counts the stream's bytes and acknowledges the last. */
async function receiveStream(comm: Communicator, id: number, bytes: number): Promise<void> {
  const server = await listen();
  try {
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await comm.send(0, { id, step: 0, chunk: 0 }, portOf(server));
    const [socket] = await accepted;
    await countBytes(socket, bytes);
    socket.end(new Uint8Array(1));
  } finally {
    server.close();
  }
}

/**
 * Every rank streams `bytes` by plain `node:net` to its right neighbour and receives as many from its
 * left, all at once: the ring's traffic with no framing, tags, copies or sums. Each rank listens and
 * tells its left neighbour where; once every link is open (a barrier), each sender times its stream
 * until its receiver acknowledges the last byte. Seconds of the slowest link on rank 0, null on the
 * others. At two ranks it is a stream each way between them. Every rank calls it.
 */
export async function rawTcpRing(comm: Communicator, bytes: number, timeoutMs: number): Promise<number | null> {
  const id = comm.nextId(); // every rank takes the id, so later collective ids stay in step
  if (comm.size < 2) return null;
  const right = (comm.rank + 1) % comm.size;
  const left = (comm.rank + comm.size - 1) % comm.size;
  const server = await listen();
  const sockets: Socket[] = [];
  try {
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await comm.send(left, { id, step: 0, chunk: 0 }, portOf(server));
    const said = await comm.recv(right, { id, step: 0, chunk: 0 }, timeoutMs);
    const toRight = createConnection({ host: '127.0.0.1', port: readPort(said), noDelay: true });
    sockets.push(toRight);
    await once(toRight, 'connect');
    const [fromLeft] = await accepted;
    sockets.push(fromLeft);
    await barrier(comm, { timeoutMs });
    const t0 = now();
    const send = writeAll(toRight, bytes).then(() => once(toRight, 'data'));
    const receive = countBytes(fromLeft, bytes).then(() => fromLeft.end(new Uint8Array(1)));
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

/** Resolves once `bytes` bytes came in on `socket`; rejects if it closes or fails first. */
function countBytes(socket: Socket, bytes: number): Promise<void> {
  let got = 0;
  return new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk: Uint8Array) => {
      got += chunk.byteLength;
      if (got >= bytes) resolve();
    });
    socket.on('error', reject);
    socket.on('close', () =>
      reject(new RingtrainError(ErrorCode.Transport, `raw TCP stream: closed after ${got} of ${bytes} bytes`)),
    );
  });
}

/** Writes `bytes` bytes from one reused buffer, waiting for 'drain' whenever the socket says it is full. */
async function writeAll(socket: Socket, bytes: number): Promise<void> {
  const block = new Uint8Array(Math.min(WRITE_BYTES, bytes));
  for (let sent = 0; sent < bytes; sent += block.byteLength) {
    const piece = block.subarray(0, Math.min(block.byteLength, bytes - sent));
    if (!socket.write(piece)) await once(socket, 'drain');
  }
}
