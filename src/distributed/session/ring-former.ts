/**
 * How a session forms its ring: open the data channels of a ready membership
 * (TCP between peers that both listen, WebRTC for every other pair), follow
 * the membership when it moves on meanwhile, drop members that never opened
 * their channels, and after a break wait for the server's next membership.
 */
import type { Communicator, LinkCommunicator } from '../../comm/communicator.ts';
import { joinWebRTCRing, type WebRTCRingOptions } from '../../comm/rings.ts';
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import { now, type EventBus, type LinkTransport } from '../../core/events.ts';
import type { Membership, SignalingClient } from '../../signaling/client.ts';
import { recordRingHolder } from './elastic-ring.ts';
import type { PeerReports } from './peer-reports.ts';
import { compareEpochs, type RingEpoch } from './ring-epoch.ts';
import { recordRingKeys } from './ring-keys.ts';
import { orderRingByRtt } from './rtt-ring.ts';
import type { GuardedRing, ServerLink } from './server-link.ts';
import type { InitOptions } from './session-types.ts';

const CONNECT_ATTEMPTS = 4;
/** Rounds of reporting members that never opened their channels, per connect (each one needs an ejection). */
const MAX_DROP_ROUNDS = 16;

export class RingFormer implements GuardedRing {
  private ringComm: Communicator | undefined;
  /** The links under `comm` (the same one unless the ring was reordered): who claimed a peer lost. */
  linkComm: LinkCommunicator | null = null;
  membership: Membership | undefined;
  links: LinkTransport[] = [];
  /** The server connection the ring was built on. */
  generation = 0;

  constructor(
    private readonly server: ServerLink,
    private readonly reports: PeerReports,
    private readonly o: InitOptions,
    private readonly events: EventBus,
  ) {}

  get comm(): Communicator | undefined {
    return this.ringComm;
  }
  /** Every ring formed here is recorded as this former's: an optimizer given session.comm follows it (elastic-ring.ts). */
  private set comm(comm: Communicator) {
    this.ringComm = comm;
    recordRingHolder(comm, this as { comm: Communicator });
  }

  /** A job whose peers may stay silent for long (TF.js's CPU backend holds the event loop through a batch) says so once, for peers that cannot be told (a page). */
  private get peerTimeoutMs(): number | undefined {
    return this.o.peerTimeoutMs ?? this.server.settings.membership.peerTimeoutMs;
  }
  /** A job whose peers cannot be told (a page) may say how long ICE gets before a peer reports no network path. */
  private get connectTimeoutMs(): number {
    return this.o.connectTimeoutMs ?? this.server.settings.links.connectTimeoutMs;
  }
  /**
   * How long the ring waits for a member that has sent no signal at all: the job's `silentPeerMs`
   * (a job open to outsiders may lower it: a member that never opens its channels stalls the ring
   * this long before it is reported); absent, 120 s (src/job/fields.ts: room for a joiner loading its data).
   */
  private get silentPeerMs(): number {
    return this.server.settings.membership.silentPeerMs;
  }

  /** Opens the data channels of `membership` (of `client`'s epochs); if the membership moves on meanwhile, follows it. */
  async connect(membership: Membership, client: SignalingClient = this.server.current): Promise<void> {
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
        return await this.form(membership, client, movedOn.signal);
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

  /** One attempt: the ring of `membership`, made this session's current one. */
  private async form(membership: Membership, client: SignalingClient, abort: AbortSignal): Promise<void> {
    const linkComm = await joinWebRTCRing({
      rank: membership.rank,
      size: membership.size,
      signaler: client.signaler(membership.epoch),
      wrtc: this.o.wrtc,
      connectTimeoutMs: this.connectTimeoutMs,
      silentTimeoutMs: Math.max(this.connectTimeoutMs, this.silentPeerMs),
      abort,
      // The job's STUN/TURN servers, from the welcome: what lets peers behind NATs meet.
      ...this.server.current.ice,
      tcp: this.tcpFor(membership, client),
      onNotice: this.server.notice,
      peerTimeoutMs: this.peerTimeoutMs,
      events: this.events,
      misbehaviour: this.reports,
    });
    this.linkComm = linkComm;
    this.comm = linkComm;
    const links = linkComm.linkTransports();
    // Internet links: run the ring in the order that keeps its slowest hop short, measured for this membership.
    let order: number[] | undefined;
    if (this.server.settingsOf(client).links.ringOrder === 'rtt') {
      const rtt = await orderRingByRtt(linkComm);
      this.comm = rtt.comm;
      order = rtt.order;
    }
    await recordRingKeys(this.ringComm!, membership, this.o.signing, order);
    this.membership = membership;
    this.generation = client === this.server.current ? this.server.generation : this.generation;
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
  }

  /** TCP links for this epoch: this peer listens and the server gave the epoch a link key (it gives none to pages). */
  private tcpFor(membership: Membership, client: SignalingClient): WebRTCRingOptions['tcp'] {
    // A job that says webrtc links every pair by WebRTC, whatever listener this peer opened.
    if (!this.o.tcp || membership.linkKey === undefined || this.server.settingsOf(client).links.transport === 'webrtc')
      return undefined;
    const key = Uint8Array.from(atob(membership.linkKey), (c) => c.charCodeAt(0));
    return { endpoint: this.o.tcp, job: client.job.id, epoch: membership.epoch, key };
  }

  /**
   * After opening the data channels of `membership` failed: reports every member that never
   * opened its channel and is not a voter (peer-reports.ts), and waits for the membership to
   * move on without them: the newer membership (connect to it), or null.
   */
  private async dropUnconnected(
    err: unknown,
    membership: Membership,
    client: SignalingClient,
  ): Promise<Membership | null> {
    // Without voters nobody can be ejected (a fresh job whose first ring never formed): fail as before.
    if (!isRingtrainError(err) || client.closed || !membership.peers.some((p) => p.voter === true)) return null;
    if (!this.reports.reportUnconnected(err, membership, client)) return null;
    const windowMs = client.heartbeatMs * (client.missedHeartbeats + 2) + this.connectTimeoutMs;
    return client.nextMembership((m) => m.epoch > membership.epoch && m.ready, windowMs).catch(() => null);
  }

  async regroup(minEpoch: RingEpoch): Promise<Communicator> {
    // A relayer another rank caught with proof is reported from here too: the majority that ejects it.
    await this.reports.judgeRelayProofs(this.comm, this.linkComm);
    await this.comm?.close();
    this.reports.confess();
    for (;;) {
      // Without a server no membership can change: wait for it (bounded by the server wait).
      const client = await this.server.usable();
      try {
        await this.connect(await this.nextReady(client, minEpoch), client);
        return this.comm!;
      } catch (err) {
        // The server went away meanwhile: once it is back (or the wait is over), go on from there.
        if (this.server.away || client !== this.server.current) continue;
        throw err;
      }
    }
  }

  /** The first ready membership of `client` at or after `minEpoch` (counted across generations). */
  private async nextReady(client: SignalingClient, minEpoch: RingEpoch): Promise<Membership> {
    const generation = client === this.server.current ? this.server.generation : this.generation;
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
        if (client.closed || !this.reports.reportFalseAbort(this.linkComm)) throw err;
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
    this.server.notice(
      `the job has ${next.size} peer(s), fewer than its minimum of ${client.job.config.minPeers}; waiting up to ${Math.round(readyMs / 1000)} s for peers to join`,
    );
    return client.nextMembership((m) => after(m) && m.ready, readyMs);
  }
}
