/**
 * init(): how a peer enters a job, in any runtime. Join the job on the
 * signaling server, wait until it has enough peers, then open WebRTC data
 * channels to every other rank of that membership epoch and wrap them in a
 * communicator. Horovod's hvd.init(), with the server in place of mpirun.
 *
 * The WebSocket and RTCPeerConnection implementations are injected, so this
 * file runs in the browser as is; session.node.ts fills them in for Node and
 * Deno.
 *
 * Elastic jobs outlive their signaling server for a while: the ring needs the
 * server only to change membership, so when it goes away the ring trains on,
 * and the session reconnects (to the same address) for up to `serverWaitMs`.
 * A restarted server numbers epochs afresh, so the elastic hooks count epochs
 * by server connection, `{ generation, epoch }` (ring-epoch.ts): any membership
 * after a reconnect is newer than every one before.
 * A peer that cannot reach the server in time leaves the ring and stops with
 * ERR_SIGNALING (the trainer then saves the last completed step); peers that
 * can reach it re-form without that one.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../core/errors.ts';
import { EventBus, now } from '../core/events.ts';
import type { Communicator, LinkCommunicator } from '../comm/communicator.ts';
import type { Misbehaviour, MisbehaviourSink } from '../comm/misbehaviour.ts';
import { joinWebRTCRing, type WebRTCRingOptions } from '../comm/rings.ts';
import type { TcpEndpoint } from '../comm/tcp-endpoint.ts';
import type { LinkTransport } from '../core/events.ts';
import { answerProbe } from './admission-probe.ts';
import { orderRingByRtt } from './rtt-ring.ts';
import { recordRingHolder } from './elastic-ring.ts';
import { connect, type ConnectOptions, type Membership, type SignalingClient } from '../signaling/client.ts';
import {
  DEFAULT_ADMIT_TIMEOUT_MS,
  FINISHED_LEAVE_REASON,
  PeerLeftReason,
  SignalErrorCode,
  type JobConfig,
  type PeerLeftMsg,
} from '../signaling/protocol.ts';
import type { ElasticHooks } from './trainer.ts';
import { parseJobSettings, type JobSettings } from './settings.ts';
import { compareEpochs, type RingEpoch } from './ring-epoch.ts';

export interface InitOptions extends Omit<ConnectOptions, 'events'> {
  /** The server's address (http(s)://host:port or ws(s)://…/ws). */
  server: string;
  /** RTCPeerConnection implementation for Node/Deno; the browser's own when omitted. */
  wrtc?: unknown;
  /**
   * Node/Deno: this peer's TCP listener (tcp-link.node.ts). Pairs of peers that both have one link
   * by TCP, proving the epoch's link key from the membership; every other pair uses WebRTC.
   */
  tcp?: TcpEndpoint;
  events?: EventBus;
  /** Called with the job's config once the server welcomed us, before any ring forms; throwing leaves the job (e.g. a --resume that does not fit). */
  beforeRing?: (job: { id: string; config: JobConfig }) => void | Promise<void>;
  /** How long to wait for the job to gather its minimum number of peers. Default 10 minutes. */
  readyTimeoutMs?: number;
  /** How long one attempt to open the data channels may take. Default: the job's `connectTimeoutMs` hyperparameter, else 30 s. */
  connectTimeoutMs?: number;
  /** A silent peer counts as gone after this long (ms). Default: the job's `peerTimeoutMs` hyperparameter, else the communicator's. */
  peerTimeoutMs?: number;
  /**
   * Elastic jobs: how long the ring trains on without its signaling server while
   * reconnecting, before it stops (ms). Default: the job's `serverWaitMs`
   * hyperparameter, else DEFAULT_SERVER_WAIT_MS.
   */
  serverWaitMs?: number;
  /** Lines worth telling a person (the server went away and came back...). Default console.warn. */
  onNotice?: (line: string) => void;
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
  /** What carries each of the current ring's links ('tcp' or 'webrtc'), by the other rank. */
  readonly links: LinkTransport[];
  readonly job: { id: string; config: JobConfig };
  /** The job's settings (its hyperparameters), checked by settings.ts's schema: read them here, typed, not by key from `job`. */
  readonly settings: JobSettings;
  readonly events: EventBus;
  /** Hooks for elastic training (trainDistributed's `elastic` option). */
  readonly elastic: ElasticHooks;
  /**
   * Where anything that finds a peer of this session's ring breaking the rules tells it: the
   * peer is reported to the server (once), whose majority of voters' reports ejects it. The
   * session's rings report to it themselves; hand it to trainDistributed (`misbehaviour`).
   */
  readonly misbehaviour: MisbehaviourSink;
  /** Calls `handler` for every peer that leaves the job (whatever the server connection). */
  onPeerLeft(handler: (p: PeerLeftMsg) => void): void;
  /**
   * A fixed job's ring that broke on a claim that a peer went away: waits the server's liveness
   * window and, if every peer claimed lost is still in the job then, names every rank that made
   * such a claim to this one (reported to the server) and returns the error the
   * job stops with. Null when nothing was claimed, a claimed peer did leave, or the job is elastic
   * (its regroup judges the claims and goes on).
   */
  judgeLossClaims(): Promise<RingtrainError | null>;
  /** Closes the data channels and leaves the job. */
  close(reason?: string): Promise<void>;
  /** Calls `handler` once the session has closed, whether closing went well or not (a timeline file is written so). */
  onClose(handler: () => void | Promise<void>): void;
}

const CONNECT_ATTEMPTS = 4;
/**
 * How long the ring waits for a member that has not signalled at all (ms). A peer is a member
 * from its join, but it loads its data (and compiles the transformer's kernels) before it can
 * answer; under load that took over 30 s, and the members that gave up then left the job.
 * A peer that is gone, not slow, is dropped by the server and the membership moves on sooner.
 */
const SILENT_PEER_MS = 120_000;
const BROKEN_RING_LINGER_MS = 1000;
/** Rounds of reporting members that never opened their channels, per connect (each one needs an ejection). */
const MAX_DROP_ROUNDS = 16;
/** How long an elastic ring trains on without its server before it stops (ms); README: ringtrain run. */
export const DEFAULT_SERVER_WAIT_MS = 60_000;
/** Pause between attempts to reach a lost server (ms). */
const RECONNECT_EVERY_MS = 1000;
/** The leave reason of a peer that completed its training (see the peer-left handler). */
export const FINISHED = FINISHED_LEAVE_REASON;

class PeerSession implements Session {
  private ringComm!: Communicator;
  /** The links under `ringComm` (the same one unless the ring was reordered): who claimed a peer lost. */
  private linkComm: LinkCommunicator | null = null;
  readonly misbehaviour: MisbehaviourSink = {
    peerMisbehaved: (finding: Misbehaviour) => this.reportPeer(finding.peer, finding.reason),
  };
  membership!: Membership;
  links: LinkTransport[] = [];
  readonly elastic: ElasticHooks;
  private current: SignalingClient;
  /** The server connection `current` is (0 for the first), and the one the ring was built on. */
  private generation = 0;
  private ringGeneration = 0;
  /** While an elastic job has lost its server: the reconnection (rejects once the wait is over). */
  private serverBack: Promise<SignalingClient> | null = null;
  private closing = false;
  private readonly closeHandlers: (() => void | Promise<void>)[] = [];
  private readonly peerLeftHandlers = new Set<(p: PeerLeftMsg) => void>();
  readonly notice: (line: string) => void;
  /** The settings of the job a server connection holds, parsed once per connection. */
  private parsed: { client: SignalingClient; settings: JobSettings } | null = null;

  constructor(
    client: SignalingClient,
    readonly events: EventBus,
    private readonly o: InitOptions,
  ) {
    this.current = client;
    this.notice = o.onNotice ?? ((line) => console.warn(`ringtrain: ${line}`));
    this.elastic = {
      currentEpoch: () => ({ generation: this.ringGeneration, epoch: this.membership.epoch }),
      latestEpoch: () => ({ generation: this.generation, epoch: this.current.membership?.epoch ?? 0 }),
      regroup: (minEpoch) => this.regroup(minEpoch),
    };
    this.attach(client);
    events.on((e) => {
      // The step checks' allgather needs every member's data at every rank, like a whole step, and
      // comes first in a step: a peer that breaks the rules at its first step is then a voter's
      // peer, and can be ejected (nobody could be in a job that had no voters yet).
      const together =
        e.type === 'train-step' || (e.type === 'collective-end' && e.ok && e.name === 'gradient-sketches');
      if (together && e.rank === this.membership?.rank) this.attest();
    });
  }

  /** The ring (server epoch) this peer has already attested. */
  private attested: { client: SignalingClient; epoch: number } | null = null;

  /**
   * After the first collective on a ring that needs every member's data at every rank (the
   * step checks' allgather, or a whole step), tell the server: it vouches for each member (what makes members voters,
   * and
   * only voters' reports count). A ring built on an earlier server connection vouches for nothing now.
   */
  private attest(): void {
    if (!this.membership || this.ringGeneration !== this.generation || this.current.closed) return;
    const epoch = this.membership.epoch;
    if (this.attested?.client === this.current && this.attested.epoch === epoch) return;
    this.attested = { client: this.current, epoch };
    this.current.attest(epoch);
  }

  /** Peer ids this peer already reported (once is enough). */
  private readonly reported = new Set<string>();

  /** A peer that broke the rules on our ring: ask the server to eject it; a majority of the other peers' reports does. */
  private reportPeer(rank: number, reason: string): void {
    const peer = this.membership?.peers[rank];
    if (!peer || rank === this.membership.rank || this.reported.has(peer.peerId)) return;
    this.reported.add(peer.peerId);
    this.notice(`reporting rank ${rank}${peer.name ? ` (${peer.name})` : ''} to the server: ${reason}`);
    this.current.report(peer.peerId, reason);
  }

  get comm(): Communicator {
    return this.ringComm;
  }
  /** Every ring this session forms is recorded as the session's: an optimizer given session.comm follows the session (elastic-ring.ts). */
  private set comm(comm: Communicator) {
    this.ringComm = comm;
    recordRingHolder(comm, this);
  }
  get client(): SignalingClient {
    return this.current;
  }
  get rank(): number {
    return this.membership.rank;
  }
  get size(): number {
    return this.membership.size;
  }
  get job(): { id: string; config: JobConfig } {
    return this.current.job;
  }
  get settings(): JobSettings {
    return this.settingsOf(this.current);
  }
  private settingsOf(client: SignalingClient): JobSettings {
    if (this.parsed?.client !== client)
      this.parsed = { client, settings: parseJobSettings(client.job.config.hyperparameters) };
    return this.parsed.settings;
  }
  private get isElastic(): boolean {
    return this.settings.elastic === true;
  }
  /** A job whose peers may stay silent for long (TF.js's CPU backend holds the event loop through a batch) says so once, for peers that cannot be told (a page). */
  private get peerTimeoutMs(): number | undefined {
    return this.o.peerTimeoutMs ?? this.settings.peerTimeoutMs;
  }
  /** A job whose peers cannot be told (a page) may say how long ICE gets before a peer reports no network path. */
  private get connectTimeoutMs(): number {
    return this.o.connectTimeoutMs ?? this.settings.connectTimeoutMs ?? 30_000;
  }
  /**
   * How long the ring waits for a member that has sent no signal at all: the job's `silentPeerMs`
   * (a job open to outsiders may lower it: a member that never opens its channels stalls the ring
   * this long before it is reported), else SILENT_PEER_MS (room for a joiner loading its data).
   */
  private get silentPeerMs(): number {
    return this.settings.silentPeerMs ?? SILENT_PEER_MS;
  }
  private get serverWaitMs(): number {
    return this.o.serverWaitMs ?? this.settings.serverWaitMs ?? DEFAULT_SERVER_WAIT_MS;
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
    client.onProbe((p) =>
      answerProbe(client, p, {
        wrtc: this.o.wrtc,
        tcp: this.o.tcp,
        deadlineMs: client.candidacy?.deadlineMs ?? this.settingsOf(client).admitTimeoutMs ?? DEFAULT_ADMIT_TIMEOUT_MS,
        onNotice: this.notice,
      }),
    );
  }

  private attach(client: SignalingClient): void {
    // The server knows first when a peer's socket dies: fail the ring at once, naming the peer.
    client.on('peer-left', (p) => {
      if (client !== this.current) return;
      for (const h of this.peerLeftHandlers) h(p);
      const ring = this.comm;
      if (!ring || this.ringGeneration !== this.generation || p.epoch !== this.membership.epoch || ring.error) return;
      // A peer that left because it finished training closed its data channels with a goodbye
      // that follows its last data, so the ring itself fails only what can no longer come;
      // aborting here would kill ranks still finishing the collective the leaver completed.
      if (p.reason === PeerLeftReason.Left && p.detail === FINISHED) return;
      // The server is shutting down, not the peer: the 'close' that follows decides what happens.
      if (p.reason === PeerLeftReason.ServerClosing) return;
      const who = p.name ? `rank ${p.rank} (${p.name})` : `rank ${p.rank}`;
      this.events.emit({ type: 'peer-lost', t: now(), rank: this.membership.rank, peer: p.rank, reason: p.reason });
      ring.abort(
        new RingtrainError(
          ErrorCode.PeerLost,
          `${who} left the job (${p.reason}${p.detail ? `: ${p.detail}` : ''}); the ring is broken`,
          { peer: p.rank, reason: p.reason },
        ),
      );
    });
    client.on('close', (err) => {
      if (client !== this.current || !err || this.closing) return;
      // Ejected by the other peers' reports: final, no reconnecting; the ring stops with why.
      if (err.detail?.code === SignalErrorCode.Ejected) {
        if (this.comm && !this.comm.error) this.comm.abort(err);
        return;
      }
      if (this.isElastic) return this.onServerLost(err);
      if (this.comm && !this.comm.error)
        this.comm.abort(
          new RingtrainError(ErrorCode.Aborted, `lost the signaling server: ${err.message}`, { cause: err.code }),
        );
    });
  }

  /** Elastic: the ring trains on while we try to reach the server again; past the wait it stops. */
  private onServerLost(err: RingtrainError): void {
    const waitMs = this.serverWaitMs;
    this.notice(
      `lost the signaling server (${err.message}); training goes on with the current ${this.membership?.size ?? 0} peers while reconnecting for up to ${Math.round(waitMs / 1000)} s`,
    );
    const since = now();
    this.serverBack = this.reconnect(since + waitMs, err);
    this.serverBack.then(
      (client) => {
        this.current = client;
        this.generation++;
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
        void this.comm?.close();
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

  /** Opens the data channels of `membership` (of `client`'s epochs); if the membership moves on meanwhile, follows it. */
  async connect(membership: Membership, client: SignalingClient = this.current): Promise<void> {
    for (let failures = 0, dropped = 0; ;) {
      // A newer membership makes this one's channels pointless (a peer we wait for may be gone): stop at once.
      const movedOn = new AbortController();
      const off = client.on('membership', (m) => {
        if (m.epoch > membership.epoch)
          movedOn.abort(
            new RingtrainError(
              ErrorCode.Aborted,
              `the membership moved on to epoch ${m.epoch} while the data channels of epoch ${membership.epoch} opened`,
            ),
          );
      });
      try {
        const linkComm = await joinWebRTCRing({
          rank: membership.rank,
          size: membership.size,
          signaler: client.signaler(membership.epoch),
          wrtc: this.o.wrtc,
          connectTimeoutMs: this.connectTimeoutMs,
          silentTimeoutMs: Math.max(this.connectTimeoutMs, this.silentPeerMs),
          abort: movedOn.signal,
          // The job's STUN/TURN servers, from the welcome: what lets peers behind NATs meet.
          ...this.client.ice,
          tcp: this.tcpFor(membership, client),
          onNotice: this.notice,
          peerTimeoutMs: this.peerTimeoutMs,
          events: this.events,
          misbehaviour: this.misbehaviour,
        });
        this.linkComm = linkComm;
        this.comm = linkComm;
        const links = linkComm.linkTransports();
        // Internet links: run the ring in the order that keeps its slowest hop short, measured for this membership.
        if (this.settingsOf(client).ringOrder === 'rtt') this.comm = (await orderRingByRtt(this.comm)).comm;
        this.membership = membership;
        this.ringGeneration = client === this.current ? this.generation : this.ringGeneration;
        const m = membership;
        this.links = links;
        this.events.emit({
          type: 'membership',
          t: now(),
          rank: m.rank,
          size: m.size,
          epoch: m.epoch,
          peers: m.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })),
          links,
        });
        return;
      } catch (err) {
        // Someone joined or left while the channels opened: try again with the newer epoch.
        // Only real failures count against the attempts; a burst of joins only moves us on.
        if (!movedOn.signal.aborted) failures++;
        // Members that never opened their channels and never proved they train (not voters):
        // report them and wait for the others' reports to eject them, instead of stopping.
        const without =
          movedOn.signal.aborted || dropped >= MAX_DROP_ROUNDS
            ? null
            : await this.dropUnconnected(err, membership, client);
        if (without) {
          failures--;
          dropped++;
          membership = without;
          continue;
        }
        const latest = client.membership;
        if (failures >= CONNECT_ATTEMPTS || !latest || latest.epoch === membership.epoch) throw err;
        membership = await client.nextMembership(
          (m) => m.epoch >= latest.epoch && m.ready,
          this.o.readyTimeoutMs ?? 600_000,
        );
      } finally {
        off();
      }
    }
  }

  /** TCP links for this epoch: this peer listens and the server gave the epoch a link key (it gives none to pages). */
  private tcpFor(membership: Membership, client: SignalingClient): WebRTCRingOptions['tcp'] {
    if (!this.o.tcp || membership.linkKey === undefined) return undefined;
    const key = Uint8Array.from(atob(membership.linkKey), (c) => c.charCodeAt(0));
    return { endpoint: this.o.tcp, job: client.job.id, epoch: membership.epoch, key };
  }

  /**
   * After opening the data channels of `membership` failed: reports every member that never
   * opened its channel (no signal at all, or no path) and is not a voter, and waits for the
   * membership to move on without them: the newer membership (connect to it), or null. A voter (it
   * trained with the others before) is never reported for this: its link failing is the
   * network's doing, and the ring stops as before.
   */
  private async dropUnconnected(
    err: unknown,
    membership: Membership,
    client: SignalingClient,
  ): Promise<Membership | null> {
    // Without voters nobody can be ejected (a fresh job whose first ring never formed): fail as before.
    if (!isRingtrainError(err) || client.closed || !membership.peers.some((p) => p.voter === true)) return null;
    const d = err.detail ?? {};
    const ranks = Array.isArray(d.waitingFor)
      ? (d.waitingFor as number[])
      : typeof d.peer === 'number' && err.code !== ErrorCode.Aborted
        ? [d.peer]
        : [];
    const suspects = ranks
      .map((r) => membership.peers[r])
      .filter((p) => p && p.voter !== true && p.rank !== membership.rank);
    if (suspects.length === 0) return null;
    for (const p of suspects) {
      if (this.reported.has(p.peerId)) continue;
      this.reported.add(p.peerId);
      const reason = `never opened a data channel in epoch ${membership.epoch} (${err.message.slice(0, 120)})`;
      this.notice(
        `reporting rank ${p.rank}${p.name ? ` (${p.name})` : ''} of epoch ${membership.epoch} to the server: it ${reason}`,
      );
      this.events.emit({
        type: 'peer-unconnected',
        t: now(),
        rank: membership.rank,
        peer: p.rank,
        epoch: membership.epoch,
        reason,
      });
      client.report(p.peerId, reason);
    }
    const windowMs = client.heartbeatMs * (client.missedHeartbeats + 2) + this.connectTimeoutMs;
    return client.nextMembership((m) => m.epoch > membership.epoch && m.ready, windowMs).catch(() => null);
  }

  async regroup(minEpoch: RingEpoch): Promise<Communicator> {
    await this.comm.close();
    for (;;) {
      // Without a server no membership can change: wait for it (bounded by the server wait).
      const client = this.serverBack ? await this.serverBack : this.current;
      try {
        await this.connect(await this.nextReady(client, minEpoch), client);
        return this.comm;
      } catch (err) {
        // The server went away meanwhile: once it is back (or the wait is over), go on from there.
        if (this.serverBack || client !== this.current) continue;
        throw err;
      }
    }
  }

  /** The first ready membership of `client` at or after `minEpoch` (counted across generations). */
  private async nextReady(client: SignalingClient, minEpoch: RingEpoch): Promise<Membership> {
    const generation = client === this.current ? this.generation : this.ringGeneration;
    const after = (m: Membership): boolean => compareEpochs({ generation, epoch: m.epoch }, minEpoch) >= 0;
    // A peer that really left is dropped by the server within its heartbeat window; if the job's
    // membership does not change by then, the ring broke for another reason (a stalled rank, a
    // false abort from a peer) and re-forming the same membership would not help.
    const windowMs = client.heartbeatMs * (client.missedHeartbeats + 2);
    let next: Membership;
    try {
      next = await client.nextMembership(after, windowMs).catch((err: unknown) => {
        // The ring broke on a claim that a peer left, from a rank that still heard that peer,
        // and the server saw no one leave: the claim was false. Report who started it, and
        // give the other peers' reports a window to eject it.
        if (client.closed || !this.reportFalseAbort()) throw err;
        return client.nextMembership(after, windowMs);
      });
    } catch (err) {
      if (client.closed) throw err;
      throw new RingtrainError(
        ErrorCode.Signaling,
        `the ring broke, but no peer joined or left the job within ${Math.round(windowMs / 1000)} s: a peer is stalled or sent a false abort; stopping instead of waiting`,
        { epoch: client.membership?.epoch },
      );
    }
    if (next.ready) return next;
    const readyMs = this.o.readyTimeoutMs ?? 600_000;
    this.notice(
      `the job has ${next.size} peer(s), fewer than its minimum of ${client.job.config.minPeers}; waiting up to ${Math.round(readyMs / 1000)} s for peers to join`,
    );
    return client.nextMembership((m) => after(m) && m.ready, readyMs);
  }

  /**
   * Called once no one left the job within the server's liveness window after the ring broke:
   * reports every rank that told this one, in its own name, that a peer went away (the
   * communicator's lossClaims: each false, since no one left); false when there is none. Each
   * honest rank reports what it heard itself, so the server's majority forms without hearsay.
   */
  private reportFalseAbort(): boolean {
    const claims = this.linkComm?.lossClaims;
    if (!claims?.size) return false;
    for (const [peer, reason] of claims) {
      this.reportPeer(peer, reason);
      // Named like any other rule-breaker on the timeline and the page.
      this.events.emit({ type: 'peer-misbehaved', t: now(), rank: this.membership.rank, peer, reason });
    }
    return true;
  }

  async judgeLossClaims(): Promise<RingtrainError | null> {
    const comm = this.linkComm;
    if (!comm?.lossClaims.size || this.isElastic) return null;
    const client = this.current;
    const ring = this.membership;
    // The peers said to be gone, by peer id: a rank of the broken ring may be another peer's in a later membership.
    const claimed = [...comm.claimedLost.values()]
      .map((r) => ring.peers[r]?.peerId)
      .filter((id): id is string => id !== undefined);
    const windowMs = client.heartbeatMs * (client.missedHeartbeats + 2);
    const oneLeft = (m: Membership) => claimed.some((id) => !m.peers.some((p) => p.peerId === id));
    const left = await client.nextMembership(oneLeft, windowMs).then(
      () => true,
      () => false,
    );
    if (left || client.closed) return null;
    this.reportFalseAbort();
    const who = [...comm.lossClaims.keys()].map(
      (r) => `rank ${r}${ring.peers[r]?.name ? ` (${ring.peers[r].name})` : ''}`,
    );
    return new RingtrainError(
      ErrorCode.PeerMisbehaved,
      `${who.join(' and ')} aborted the ring saying a peer went away, but every peer it named was still in the job ${Math.round(windowMs / 1000)} s later: a false abort, reported to the server. The job is not elastic, so it stops: resume from the recovery checkpoint without ${who.length > 1 ? 'them' : 'it'}`,
      { peer: [...comm.lossClaims.keys()][0], culprits: [...comm.lossClaims.keys()] },
    );
  }

  onClose(handler: () => void | Promise<void>): void {
    this.closeHandlers.push(handler);
  }

  async close(reason?: string): Promise<void> {
    this.closing = true;
    try {
      // A broken ring lingers a moment before its channels go: the other ranks are still
      // hearing why it broke (the server's peer-left, our abort frame), and our channels
      // closing first would read to them as if we were the one who went away.
      const broken = this.comm?.error;
      if (broken) await new Promise((r) => setTimeout(r, BROKEN_RING_LINGER_MS));
      await this.comm?.close();
      // Leaving because the ring broke: say what broke it, so a rank that hears of our leave
      // before the original cause still names the peer that started it.
      await this.current.leave(broken && reason !== FINISHED ? `${reason ?? 'stopped'}: ${broken.message}` : reason);
    } finally {
      for (const handler of this.closeHandlers.splice(0)) await handler();
    }
  }
}

export async function init(o: InitOptions): Promise<Session> {
  const events = o.events ?? new EventBus();
  const client = await connect(o.server, { ...o, events });
  const session = new PeerSession(client, events, o);
  try {
    // A job whose settings this peer cannot read is refused here, naming the setting, before the ring.
    void session.settings;
    await o.beforeRing?.(client.job);
    session.answerProbes(client);
    if (client.candidacy)
      session.notice(
        `joining a running job: echoing with the would-be ring neighbours before the server admits this peer (within ${client.candidacy.deadlineMs} ms of the join)`,
      );
    await session.connect(await client.waitForReady(o.readyTimeoutMs ?? 600_000));
    return session;
  } catch (err) {
    await client.leave(isRingtrainError(err) ? err.code : 'init failed');
    throw err;
  }
}
