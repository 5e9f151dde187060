/** A ring of memory links whose communicators record the events each rank saw (the robust tests' fixture). */
import { LinkCommunicator } from '../../src/comm/communicator.ts';
import { memoryMesh } from '../../src/comm/memory-link.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';

export function ring(size: number, budget?: { maxBytes?: number; maxMessages?: number }) {
  const mesh = memoryMesh(size);
  const seen: RingEvent[][] = [];
  const comms = mesh.map((links, rank) => {
    const events = new EventBus();
    const mine: RingEvent[] = [];
    events.on((e) => mine.push(e));
    seen.push(mine);
    return new LinkCommunicator(rank, size, links, { events, peerTimeoutMs: 0, budget });
  });
  return { comms, seen, mesh };
}
