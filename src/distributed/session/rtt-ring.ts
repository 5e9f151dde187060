/**
 * The job's `ringOrder: 'rtt'`: when a ring forms, measure the round trip and
 * the bandwidth between every pair of its peers and run the ring in the order
 * that keeps the slowest hop short (src/collectives/ring-order.ts). Every peer measures the
 * same matrix (it is allgathered), so every peer wraps with the same order;
 * rank 0 stays rank 0 (the order starts there), so the root does not move.
 * A new membership forms a new ring, so the order is measured again.
 */
import type { Communicator } from '../../comm/interface.ts';
import { reorderedCommunicator } from '../../comm/reordered.ts';
import { hopCostsMs, measureLinks, ringOrder, tourCost } from '../../collectives/ring-order.ts';

export interface RttRing {
  comm: Communicator;
  /** order[i]: the transport's rank at ring position i. */
  order: number[];
  /** Round trips (ms) as measured, by the transport's ranks. */
  rttMs: number[][];
  /** Bandwidths (MB/s) of the timed transfers, by the transport's ranks. */
  mbps: number[][];
  /** The slowest hop (its round trip plus a bucket at its rate) of the chosen ring and of the ring in rank order (ms). */
  slowestHopMs: number;
  rankOrderSlowestHopMs: number;
}

export async function orderRingByRtt(comm: Communicator, timeoutMs?: number): Promise<RttRing> {
  const measured = await measureLinks(comm, { timeoutMs });
  const cost = hopCostsMs(measured);
  const order = ringOrder(cost);
  return {
    comm: reorderedCommunicator(comm, order),
    order,
    ...measured,
    slowestHopMs: tourCost(cost, order).slowest,
    rankOrderSlowestHopMs: tourCost(
      cost,
      cost.map((_, i) => i),
    ).slowest,
  };
}
