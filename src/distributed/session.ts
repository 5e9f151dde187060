/**
 * init(): how a peer enters a job, in any runtime. Join the job on the
 * signaling server, wait until it has enough peers, then open WebRTC data
 * channels to every other rank of that membership epoch and wrap them in a
 * communicator. Horovod's hvd.init(), with the server in place of mpirun.
 *
 * The WebSocket and RTCPeerConnection implementations are injected, so this
 * file runs in the browser as is; session.node.ts fills them in for Node and
 * Deno.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../core/errors.ts';
import { EventBus, now } from '../core/events.ts';
import type { Communicator } from '../comm/communicator.ts';
import { joinWebRTCRing } from '../comm/rings.ts';
import { connect, type ConnectOptions, type Membership, type SignalingClient } from '../signaling/client.ts';
import type { JobConfig } from '../signaling/protocol.ts';

export interface InitOptions extends Omit<ConnectOptions, 'events'> {
  /** The server's address (http(s)://host:port or ws(s)://…/ws). */
  server: string;
  /** RTCPeerConnection implementation for Node/Deno; the browser's own when omitted. */
  wrtc?: unknown;
  events?: EventBus;
  /** How long to wait for the job to gather its minimum number of peers. Default 10 minutes. */
  readyTimeoutMs?: number;
  /** How long one attempt to open the data channels may take. Default 30 s. */
  connectTimeoutMs?: number;
  /** A silent peer counts as gone after this long (ms). */
  peerTimeoutMs?: number;
}

export interface Session {
  readonly rank: number;
  readonly size: number;
  readonly comm: Communicator;
  readonly client: SignalingClient;
  readonly membership: Membership;
  readonly job: { id: string; config: JobConfig };
  readonly events: EventBus;
  /** Closes the data channels and leaves the job. */
  close(reason?: string): Promise<void>;
}

const CONNECT_ATTEMPTS = 4;

export async function init(o: InitOptions): Promise<Session> {
  const events = o.events ?? new EventBus();
  const client = await connect(o.server, { ...o, events });
  try {
    let membership = await client.waitForReady(o.readyTimeoutMs ?? 600_000);
    let comm: Communicator | undefined;
    for (let attempt = 1; !comm; attempt++) {
      try {
        comm = await joinWebRTCRing({
          rank: membership.rank,
          size: membership.size,
          signaler: client.signaler(membership.epoch),
          wrtc: o.wrtc,
          connectTimeoutMs: o.connectTimeoutMs ?? 30_000,
          peerTimeoutMs: o.peerTimeoutMs,
          events,
        });
      } catch (err) {
        // Someone joined or left while the channels opened: try again with the newer epoch.
        const latest = client.membership;
        if (attempt >= CONNECT_ATTEMPTS || !latest || latest.epoch === membership.epoch || !latest.ready) throw err;
        membership = latest;
      }
    }
    const ring = comm;
    events.emit({ type: 'membership', t: now(), rank: membership.rank, size: membership.size, epoch: membership.epoch, peers: membership.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })) });
    // The server knows first when a peer's socket dies: fail the ring at once, naming it.
    client.on('peer-left', (p) => {
      if (p.epoch !== membership.epoch || ring.error) return;
      const who = p.name ? `rank ${p.rank} (${p.name})` : `rank ${p.rank}`;
      events.emit({ type: 'peer-lost', t: now(), rank: membership.rank, peer: p.rank, reason: p.reason });
      ring.abort(new RingtrainError(ErrorCode.PeerLost, `${who} left the job (${p.reason}${p.detail ? `: ${p.detail}` : ''}); the ring is broken`, { peer: p.rank, reason: p.reason }));
    });
    client.on('close', (err) => {
      if (err && !ring.error) ring.abort(new RingtrainError(ErrorCode.Aborted, `lost the signaling server: ${err.message}`, { cause: err.code }));
    });
    return {
      rank: membership.rank,
      size: membership.size,
      comm: ring,
      client,
      membership,
      job: client.job,
      events,
      async close(reason?: string) {
        ring.close();
        await client.leave(reason);
      },
    };
  } catch (err) {
    await client.leave(isRingtrainError(err) ? err.code : 'init failed');
    throw err;
  }
}
