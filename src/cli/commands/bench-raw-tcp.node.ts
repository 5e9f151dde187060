/**
 * The yardstick the TCP ring is held to (issue 34): a plain `node:net` stream over loopback from
 * rank 0 to rank 1 of a benchmark ring, in the same run, between the same two processes, with no
 * framing, tags, copies or sums: what this machine's TCP gives two processes. Rank 1 listens on a
 * free loopback port and tells rank 0 through the ring; rank 0 writes the bytes, rank 1 answers
 * one byte when it has them all.
 */
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Communicator } from '../../comm/interface.ts';
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
  const port = new DataView(said.buffer, said.byteOffset, 4).getUint32(0, true);
  const socket = createConnection({ host: '127.0.0.1', port, noDelay: true });
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
  const server: Server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const port = new Uint8Array(4);
    new DataView(port.buffer).setUint32(0, (server.address() as { port: number }).port, true);
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await comm.send(0, { id, step: 0, chunk: 0 }, port);
    const [socket] = await accepted;
    let got = 0;
    await new Promise<void>((resolve, reject) => {
      socket.on('data', (chunk: Uint8Array) => {
        got += chunk.byteLength;
        if (got >= bytes) resolve();
      });
      socket.on('error', reject);
      socket.on('close', () =>
        reject(new RingtrainError(ErrorCode.Transport, `raw TCP stream: closed after ${got} of ${bytes} bytes`)),
      );
    });
    socket.end(new Uint8Array(1));
  } finally {
    server.close();
  }
}

/** Writes `bytes` bytes from one reused buffer, waiting for 'drain' whenever the socket says it is full. */
async function writeAll(socket: Socket, bytes: number): Promise<void> {
  const block = new Uint8Array(Math.min(WRITE_BYTES, bytes));
  for (let sent = 0; sent < bytes; sent += block.byteLength) {
    const piece = block.subarray(0, Math.min(block.byteLength, bytes - sent));
    if (!socket.write(piece)) await once(socket, 'drain');
  }
}
