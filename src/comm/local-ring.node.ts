import { randomBytes } from 'node:crypto';
import { FileStore } from './file-store.node.ts';
import { makeLinkCertificate } from './link-cert.node.ts';
import type { Communicator, CommunicatorOptions } from './communicator.ts';
import { joinWebRTCRing } from './rings.ts';
import { StoreSignaler } from './store.ts';
import { TcpLinkEndpoint } from './tcp-link.node.ts';
import { loadWrtc } from './wrtc.node.ts';

export interface LocalRingOptions extends CommunicatorOptions {
  /** A directory every process of the ring shares (a fresh temp dir per ring). */
  dir: string;
  rank: number;
  size: number;
  connectTimeoutMs?: number;
  /** 'tcp': link by TCP over loopback (WebRTC for a pair whose dial fails); 'tls': the same encrypted; default 'webrtc'. */
  transport?: 'webrtc' | 'tcp' | 'tls';
  /** The RTCPeerConnection implementation for WebRTC links (default `@roamhq/wrtc`'s), e.g. another stack to compare. */
  wrtc?: unknown;
}

/** Rank 0 makes the ring's link key and leaves it in the shared directory; the others read it there. */
async function ringLinkKey(store: FileStore, rank: number, timeoutMs: number): Promise<Uint8Array> {
  if (rank === 0) await store.set('link-key', randomBytes(32).toString('base64'));
  const [key] = await store.wait(['link-key'], timeoutMs);
  return Uint8Array.from(Buffer.from(key, 'base64'));
}

/**
 * One process's way into a ring of processes on this machine, Node or Deno:
 * signals go through a FileStore in `dir`, data over real WebRTC (or TCP).
 * Run it inside a network namespace (scripts/in-netns.sh).
 */
export async function joinLocalRing(o: LocalRingOptions): Promise<Communicator> {
  const store = new FileStore(o.dir);
  const signaler = new StoreSignaler(store, o.rank, o.size);
  const direct = o.transport === 'tcp' || o.transport === 'tls';
  const endpoint = direct
    ? await TcpLinkEndpoint.listen({
        host: '127.0.0.1',
        port: 0,
        tls: o.transport === 'tls' ? makeLinkCertificate() : undefined,
      })
    : undefined;
  try {
    const tcp = endpoint && {
      endpoint,
      job: 'local-ring',
      epoch: 0,
      key: await ringLinkKey(store, o.rank, o.connectTimeoutMs ?? 30_000),
    };
    return await joinWebRTCRing({ ...o, signaler, wrtc: o.wrtc ?? loadWrtc(), tcp });
  } finally {
    // Candidates after connect are not needed on one machine; a ring of one epoch accepts no more links.
    signaler.close();
    endpoint?.close();
  }
}
