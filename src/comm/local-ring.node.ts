import { FileStore } from './file-store.node.ts';
import type { Communicator, CommunicatorOptions } from './communicator.ts';
import { joinWebRTCRing } from './rings.ts';
import { StoreSignaler } from './store.ts';
import { loadWrtc } from './wrtc.node.ts';

export interface LocalRingOptions extends CommunicatorOptions {
  /** A directory every process of the ring shares (a fresh temp dir per ring). */
  dir: string;
  rank: number;
  size: number;
  connectTimeoutMs?: number;
}

/**
 * One process's way into a ring of processes on this machine, Node or Deno:
 * signals go through a FileStore in `dir`, data over real WebRTC.
 * Run it inside a network namespace (scripts/in-netns.sh).
 */
export async function joinLocalRing(o: LocalRingOptions): Promise<Communicator> {
  const signaler = new StoreSignaler(new FileStore(o.dir), o.rank, o.size);
  try {
    return await joinWebRTCRing({ ...o, signaler, wrtc: loadWrtc() });
  } finally {
    // Candidates after connect are not needed on one machine.
    signaler.close();
  }
}
