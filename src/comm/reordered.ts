/**
 * A communicator whose ranks follow a chosen ring order: position i of
 * `order` becomes rank i. Collectives send to rank+1, so the ring runs along
 * `order` (the RTT-aware one of src/collectives/ring-order.ts) without any
 * collective knowing. Every rank must wrap with the same order.
 *
 * Events and error details from the transport underneath still name the
 * original ranks (the transport's own numbering).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Communicator } from './interface.ts';

export function reorderedCommunicator(comm: Communicator, order: number[]): Communicator {
  const size = comm.size;
  const sorted = [...order].sort((a, b) => a - b);
  if (order.length !== size || sorted.some((r, i) => r !== i)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `ring order must list each of the ${size} ranks once, got [${order.join(', ')}]`,
    );
  }
  const position = new Array<number>(size);
  order.forEach((r, i) => (position[r] = i));
  return {
    rank: position[comm.rank],
    size,
    events: comm.events,
    send: (peer, tag, payload) => comm.send(order[peer], tag, payload),
    recv: (peer, tag, timeoutMs) => comm.recv(order[peer], tag, timeoutMs),
    forget: comm.forget ? (id, step) => comm.forget!(id, step) : undefined,
    release: comm.release ? (peer, payload) => comm.release!(order[peer], payload) : undefined,
    expect: comm.expect ? (peer, bytes) => comm.expect!(order[peer], bytes) : undefined,
    nextId: () => comm.nextId(),
    abort: (err) => comm.abort(err),
    get error() {
      return comm.error;
    },
    close: () => comm.close(),
    get stats() {
      return comm.stats;
    },
  };
}
