/**
 * Teaching mode, the recording half: N virtual peers in this tab, a full mesh
 * of in-memory links, one LinkCommunicator each on an event bus that asks
 * for values (so chunk events carry their numbers), and the library's real
 * ring allreduce on small whole numbers. Everything they emit is recorded for the replay.
 */
import { EventBus, type RingEvent } from '../../../src/core/events.ts';
import { LinkCommunicator } from '../../../src/comm/communicator.ts';
import { memoryMesh } from '../../../src/comm/memory-link.ts';
import { allreduce } from '../../../src/collectives/allreduce.ts';
import { mulberry32 } from '../../../src/data/random.ts';
import type { TeachRecording } from './frames.ts';

/** Elements per chunk: two, so a chunk visibly is a slice of the vector and not one number. */
const ELEMENTS_PER_PEER = 2;
/** Inputs are 0..MAX_INPUT so sums stay easy to check by eye. */
const MAX_INPUT = 9;

export function teachingInputs(size: number, seed: number): number[][] {
  const random = mulberry32(seed);
  return Array.from({ length: size }, () =>
    Array.from({ length: size * ELEMENTS_PER_PEER }, () => Math.floor(random() * (MAX_INPUT + 1))),
  );
}

export async function recordTeachingRun(size: number, seed: number): Promise<TeachRecording & { outputs: number[][] }> {
  const inputs = teachingInputs(size, seed);
  const bus = new EventBus({ withValues: true });
  const events: RingEvent[] = [];
  bus.on((e) => events.push(e));
  const mesh = memoryMesh(size);
  // Memory links report a closed peer at once, so heartbeats are off (peerTimeoutMs 0).
  const comms = mesh.map((links, rank) => new LinkCommunicator(rank, size, links, { events: bus, peerTimeoutMs: 0 }));
  try {
    const outputs = await Promise.all(
      comms.map((c, r) =>
        allreduce(c, Int32Array.from(inputs[r]), { name: 'teaching', op: 'sum', algorithm: 'ring', timeoutMs: 10_000 }),
      ),
    );
    return { size, inputs, events, outputs: outputs.map((o) => Array.from(o)) };
  } finally {
    for (const c of comms) c.close();
  }
}
