/** A ring of memory links whose communicators record the events each rank saw (the robust tests' fixture). */
import { LinkCommunicator } from '../../src/comm/communicator.ts';
import { memoryMesh } from '../../src/comm/memory-link.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import { newSigningKeys, recordRingKeys, type SigningKeys } from '../../src/distributed/session/ring-keys.ts';
import type { Membership } from '../../src/signaling/client.ts';

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

/** `ring(size)` whose ranks hold each other's signing keys, as a membership hands them out (signed gathers). */
export async function signedRing(size: number) {
  const r = ring(size);
  const keys = (await Promise.all(r.comms.map(() => newSigningKeys()))) as SigningKeys[];
  const membership = {
    peers: keys.map((k, rank) => ({ rank, peerId: `p${rank}`, runtime: 'node', signingKey: k.publicText })),
  } as unknown as Membership;
  await Promise.all(r.comms.map((c, rank) => recordRingKeys(c, membership, keys[rank])));
  return r;
}
