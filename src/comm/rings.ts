import { emulateLink, type LinkEmulation } from './emulated-link.ts';
import { LinkCommunicator, type Communicator, type CommunicatorOptions } from './communicator.ts';
import { memoryMesh } from './memory-link.ts';
import { connectLinks, type TcpLinkOptions } from './mesh.ts';
import type { Signaler } from './signaler.ts';
import type { ConnectOptions } from './webrtc-link.ts';

/** `size` communicators in this process over memory links (tests, the page's teaching mode). */
export function createMemoryRing(size: number, options: CommunicatorOptions = {}): Communicator[] {
  const mesh = memoryMesh(size);
  // Memory links report a closed end directly, so heartbeats are off unless asked for.
  return mesh.map((links, rank) => new LinkCommunicator(rank, size, links, { peerTimeoutMs: 0, ...options }));
}

export interface WebRTCRingOptions extends CommunicatorOptions {
  rank: number;
  size: number;
  signaler: Signaler;
  wrtc?: unknown;
  connectTimeoutMs?: number;
  /** See ConnectOptions.silentTimeoutMs. */
  silentTimeoutMs?: number;
  abort?: AbortSignal;
  iceServers?: ConnectOptions['iceServers'];
  iceTransportPolicy?: ConnectOptions['iceTransportPolicy'];
  /** TCP links to the peers that listen too (mesh.ts); absent: WebRTC only. */
  tcp?: TcpLinkOptions;
  /** Told when a pair falls back from TCP to WebRTC. */
  onNotice?: (line: string) => void;
  /** Benchmarks: make every link a long thin pipe (emulated-link.ts). */
  linkEmulation?: LinkEmulation;
}

/**
 * Joins a ring: opens the mesh through `signaler` (TCP between peers that both listen, WebRTC
 * for every other pair: mesh.ts), then wraps it in a communicator.
 */
export async function joinWebRTCRing(o: WebRTCRingOptions): Promise<LinkCommunicator> {
  const links = await connectLinks({
    rank: o.rank,
    size: o.size,
    signaler: o.signaler,
    wrtc: o.wrtc,
    timeoutMs: o.connectTimeoutMs,
    silentTimeoutMs: o.silentTimeoutMs,
    abort: o.abort,
    iceServers: o.iceServers,
    iceTransportPolicy: o.iceTransportPolicy,
    tcp: o.tcp,
    onNotice: o.onNotice,
  });
  const e = o.linkEmulation;
  return new LinkCommunicator(
    o.rank,
    o.size,
    e ? new Map([...links].map(([peer, link]) => [peer, emulateLink(link, e)])) : links,
    o,
  );
}
