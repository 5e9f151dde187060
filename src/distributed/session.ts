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
import { PeerLeftReason, type JobConfig } from '../signaling/protocol.ts';
import type { ElasticHooks } from './trainer.ts';

export interface InitOptions extends Omit<ConnectOptions, 'events'> {
  /** The server's address (http(s)://host:port or ws(s)://…/ws). */
  server: string;
  /** RTCPeerConnection implementation for Node/Deno; the browser's own when omitted. */
  wrtc?: unknown;
  events?: EventBus;
  /** Called with the job's config once the server welcomed us, before any ring forms; throwing leaves the job (e.g. a --resume that does not fit). */
  beforeRing?: (job: { id: string; config: JobConfig }) => void | Promise<void>;
  /** How long to wait for the job to gather its minimum number of peers. Default 10 minutes. */
  readyTimeoutMs?: number;
  /** How long one attempt to open the data channels may take. Default 30 s. */
  connectTimeoutMs?: number;
  /** A silent peer counts as gone after this long (ms). */
  peerTimeoutMs?: number;
}

export interface Session {
  /** This peer's rank in the current ring. */
  readonly rank: number;
  readonly size: number;
  /** The current ring's communicator (a new one after every regroup). */
  readonly comm: Communicator;
  readonly client: SignalingClient;
  /** The membership the current ring was built for. */
  readonly membership: Membership;
  readonly job: { id: string; config: JobConfig };
  readonly events: EventBus;
  /** Hooks for elastic training (trainDistributed's `elastic` option). */
  readonly elastic: ElasticHooks;
  /** Closes the data channels and leaves the job. */
  close(reason?: string): Promise<void>;
}

const CONNECT_ATTEMPTS = 4;
const BROKEN_RING_LINGER_MS = 1000;
/** The leave reason of a peer that completed its training (see the peer-left handler). */
export const FINISHED = 'done';

class PeerSession implements Session {
  comm!: Communicator;
  membership!: Membership;
  readonly elastic: ElasticHooks;

  constructor(
    readonly client: SignalingClient,
    readonly events: EventBus,
    private readonly o: InitOptions,
  ) {
    this.elastic = {
      currentEpoch: () => this.membership.epoch,
      latestEpoch: () => client.membership?.epoch ?? this.membership.epoch,
      regroup: (minEpoch) => this.regroup(minEpoch),
    };
    // The server knows first when a peer's socket dies: fail the ring at once, naming the peer.
    client.on('peer-left', (p) => {
      const ring = this.comm;
      if (!ring || p.epoch !== this.membership.epoch || ring.error) return;
      // A peer that left because it finished training closed its data channels with a goodbye
      // that follows its last data, so the ring itself fails only what can no longer come;
      // aborting here would kill ranks still finishing the collective the leaver completed.
      if (p.reason === PeerLeftReason.Left && p.detail === FINISHED) return;
      const who = p.name ? `rank ${p.rank} (${p.name})` : `rank ${p.rank}`;
      events.emit({ type: 'peer-lost', t: now(), rank: this.membership.rank, peer: p.rank, reason: p.reason });
      ring.abort(new RingtrainError(ErrorCode.PeerLost, `${who} left the job (${p.reason}${p.detail ? `: ${p.detail}` : ''}); the ring is broken`, { peer: p.rank, reason: p.reason }));
    });
    client.on('close', (err) => {
      if (err && this.comm && !this.comm.error) this.comm.abort(new RingtrainError(ErrorCode.Aborted, `lost the signaling server: ${err.message}`, { cause: err.code }));
    });
  }

  get rank(): number {
    return this.membership.rank;
  }
  get size(): number {
    return this.membership.size;
  }
  get job(): { id: string; config: JobConfig } {
    return this.client.job;
  }

  /** Opens the data channels of `membership`; if the membership moves on meanwhile, follows it. */
  async connect(membership: Membership): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        this.comm = await joinWebRTCRing({
          rank: membership.rank,
          size: membership.size,
          signaler: this.client.signaler(membership.epoch),
          wrtc: this.o.wrtc,
          connectTimeoutMs: this.o.connectTimeoutMs ?? 30_000,
          peerTimeoutMs: this.o.peerTimeoutMs,
          events: this.events,
        });
        this.membership = membership;
        const m = membership;
        this.events.emit({ type: 'membership', t: now(), rank: m.rank, size: m.size, epoch: m.epoch, peers: m.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })) });
        return;
      } catch (err) {
        // Someone joined or left while the channels opened: try again with the newer epoch.
        const latest = this.client.membership;
        if (attempt >= CONNECT_ATTEMPTS || !latest || latest.epoch === membership.epoch) throw err;
        membership = await this.client.nextMembership((m) => m.epoch >= latest.epoch && m.ready, this.o.readyTimeoutMs ?? 600_000);
      }
    }
  }

  async regroup(minEpoch: number): Promise<Communicator> {
    await this.comm.close();
    const next = await this.client.nextMembership((m) => m.epoch >= minEpoch && m.ready, this.o.readyTimeoutMs ?? 600_000);
    await this.connect(next);
    return this.comm;
  }

  async close(reason?: string): Promise<void> {
    // A broken ring lingers a moment before its channels go: the other ranks are still
    // hearing why it broke (the server's peer-left, our abort frame), and our channels
    // closing first would read to them as if we were the one who went away.
    const broken = this.comm?.error;
    if (broken) await new Promise((r) => setTimeout(r, BROKEN_RING_LINGER_MS));
    await this.comm?.close();
    // Leaving because the ring broke: say what broke it, so a rank that hears of our leave
    // before the original cause still names the peer that started it.
    await this.client.leave(broken && reason !== FINISHED ? `${reason ?? 'stopped'}: ${broken.message}` : reason);
  }
}

export async function init(o: InitOptions): Promise<Session> {
  const events = o.events ?? new EventBus();
  const client = await connect(o.server, { ...o, events });
  const session = new PeerSession(client, events, o);
  try {
    await o.beforeRing?.(client.job);
    await session.connect(await client.waitForReady(o.readyTimeoutMs ?? 600_000));
    return session;
  } catch (err) {
    await client.leave(isRingtrainError(err) ? err.code : 'init failed');
    throw err;
  }
}
