/**
 * A session's connection to its signaling server: the job's settings as the
 * current connection holds them, the peers that leave, and the server going
 * away. The server knows first when a peer's socket dies, so a peer that
 * leaves fails the ring at once, naming it. An elastic ring outlives its
 * server for a while (the server is needed only to change membership): the
 * ring trains on and the link reconnects to the same address for up to
 * `serverWaitMs`, one generation per connection (ring-epoch.ts); past that the
 * peer leaves the ring quietly, and its regroup stops with ERR_SIGNALING.
 */
import type { Communicator } from '../../comm/communicator.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now, type EventBus } from '../../core/events.ts';
import { connect, type Membership, type SignalingClient } from '../../signaling/client.ts';
import { FINISHED_LEAVE_REASON, PeerLeftReason, SignalErrorCode, type PeerLeftMsg } from '../../signaling/protocol.ts';
import { answerProbe } from './admission-probe.ts';
import { ProbeQueue } from './probe-queue.ts';
import type { InitOptions } from './session-types.ts';
import { parseJobSettings, type JobSettings } from '../../job/settings.ts';

/** Pause between attempts to reach a lost server (ms). */
const RECONNECT_EVERY_MS = 1000;

/** What the server link guards: the ring a session trains on now (ring-former.ts). */
export interface GuardedRing {
  readonly comm: Communicator | undefined;
  readonly membership: Membership | undefined;
  /** The server connection the ring was formed on. */
  readonly generation: number;
}

export class ServerLink {
  private connection: SignalingClient;
  /** The server connection `current` is (0 for the first). */
  private connections = 0;
  /** While an elastic job has lost its server: the reconnection (rejects once the wait is over). */
  private serverBack: Promise<SignalingClient> | null = null;
  /** Set once the session closes: no reconnecting, no aborting on our own leave. */
  closing = false;
  private readonly peerLeftHandlers = new Set<(p: PeerLeftMsg) => void>();
  /** The settings of the job a server connection holds, parsed once per connection. */
  private parsed: { client: SignalingClient; settings: JobSettings } | null = null;

  constructor(
    client: SignalingClient,
    private readonly o: InitOptions,
    private readonly events: EventBus,
    readonly notice: (line: string) => void,
    private readonly ring: () => GuardedRing,
  ) {
    this.connection = client;
    this.attach(client);
  }

  get current(): SignalingClient {
    return this.connection;
  }
  get generation(): number {
    return this.connections;
  }
  /** The connection to form rings on: while the server is away, the reconnection (bounded by the server wait). */
  async usable(): Promise<SignalingClient> {
    return this.serverBack ? await this.serverBack : this.connection;
  }
  /** Whether the server is away now (a reconnection is under way). */
  get away(): boolean {
    return this.serverBack !== null;
  }

  settingsOf(client: SignalingClient): JobSettings {
    if (this.parsed?.client !== client)
      this.parsed = { client, settings: parseJobSettings(client.job.config.hyperparameters) };
    return this.parsed.settings;
  }
  get settings(): JobSettings {
    return this.settingsOf(this.connection);
  }
  private get serverWaitMs(): number {
    return this.o.serverWaitMs ?? this.settings.membership.serverWaitMs;
  }

  onPeerLeft(handler: (p: PeerLeftMsg) => void): void {
    this.peerLeftHandlers.add(handler);
  }

  /**
   * Staged admission: as a joiner, echo with the would-be neighbours; as a member, with each
   * joiner the server names, beside training (a ghost's probe only times out here). init() starts
   * it after `beforeRing`: a joiner that echoes is ready to train (data loaded, kernels compiled),
   * so the ring that takes it in never waits for its preparation. Probes that came before wait.
   */
  answerProbes(client: SignalingClient): void {
    const probes = new ProbeQueue({
      answer: (p, deadlineMs) =>
        answerProbe(client, p, { wrtc: this.o.wrtc, tcp: this.o.tcp, deadlineMs, onNotice: this.notice }),
      skip: (p) => client.endProbe(p.probe),
      events: this.events,
      rank: () => client.membership?.rank ?? -1,
    });
    client.onProbe((p) =>
      probes.add(p, client.candidacy?.deadlineMs ?? this.settingsOf(client).membership.admitTimeoutMs),
    );
  }

  private attach(client: SignalingClient): void {
    client.on('peer-left', (p) => {
      if (client !== this.connection) return;
      for (const h of this.peerLeftHandlers) h(p);
      this.failRingOn(p);
    });
    client.on('close', (err) => {
      if (client !== this.connection || !err || this.closing) return;
      const { comm } = this.ring();
      // Ejected by the other peers' reports: final, no reconnecting; the ring stops with why.
      if (err.detail?.code === SignalErrorCode.Ejected) {
        if (comm && !comm.error) comm.abort(err);
        return;
      }
      if (this.settings.membership.elastic) return this.onServerLost(err);
      if (comm && !comm.error)
        comm.abort(
          new RingtrainError(ErrorCode.Aborted, `lost the signaling server: ${err.message}`, { cause: err.code }),
        );
    });
  }

  /** A peer of the current ring left the job: the ring is broken, naming it (unless its leaving breaks nothing). */
  private failRingOn(p: PeerLeftMsg): void {
    const { comm: ring, membership, generation } = this.ring();
    if (!ring || !membership || generation !== this.connections || p.epoch !== membership.epoch || ring.error) return;
    // A peer that left because it finished training closed its data channels with a goodbye
    // that follows its last data, so the ring itself fails only what can no longer come;
    // aborting here would kill ranks still finishing the collective the leaver completed.
    if (p.reason === PeerLeftReason.Left && p.detail === FINISHED_LEAVE_REASON) return;
    // The server is shutting down, not the peer: the 'close' that follows decides what happens.
    if (p.reason === PeerLeftReason.ServerClosing) return;
    const who = p.name ? `rank ${p.rank} (${p.name})` : `rank ${p.rank}`;
    this.events.emit({ type: 'peer-lost', t: now(), rank: membership.rank, peer: p.rank, reason: p.reason });
    ring.abort(
      new RingtrainError(
        ErrorCode.PeerLost,
        `${who} left the job (${p.reason}${p.detail ? `: ${p.detail}` : ''}); the ring is broken`,
        { peer: p.rank, reason: p.reason },
      ),
    );
  }

  /** Elastic: the ring trains on while we try to reach the server again; past the wait it stops. */
  private onServerLost(err: RingtrainError): void {
    const waitMs = this.serverWaitMs;
    this.notice(
      `lost the signaling server (${err.message}); training goes on with the current ${this.ring().membership?.size ?? 0} peers while reconnecting for up to ${Math.round(waitMs / 1000)} s`,
    );
    const since = now();
    this.serverBack = this.reconnect(since + waitMs, err);
    this.serverBack.then(
      (client) => {
        this.connection = client;
        this.connections++;
        this.serverBack = null;
        this.attach(client);
        this.answerProbes(client);
        this.notice(
          `reconnected to the signaling server after ${((now() - since) / 1000).toFixed(1)} s; the ring re-forms on its new membership`,
        );
      },
      () => {
        // Leave the ring quietly rather than abort it: peers that still reach the server see a
        // peer gone and re-form without us; our own trainer's regroup then meets the rejected
        // reconnection and stops with its ERR_SIGNALING.
        void this.ring().comm?.close();
      },
    );
  }

  private async reconnect(deadline: number, cause: RingtrainError): Promise<SignalingClient> {
    while (!this.closing && now() < deadline) {
      try {
        const client = await connect(this.o.server, {
          ...this.o,
          events: this.events,
          timeoutMs: Math.max(1, Math.min(5000, deadline - now())),
        });
        if (!this.closing) return client;
        await client.leave('stopped');
        break;
      } catch {
        await new Promise((r) => setTimeout(r, Math.max(0, Math.min(RECONNECT_EVERY_MS, deadline - now()))));
      }
    }
    throw new RingtrainError(
      ErrorCode.Signaling,
      `lost the signaling server at ${this.o.server} (${cause.message}) and it did not come back within ${Math.round(this.serverWaitMs / 1000)} s; the ring cannot change membership without it, so training stops here`,
      { cause: cause.message },
    );
  }
}
