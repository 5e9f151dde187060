/**
 * What a session tells the server about the peers of its ring. A peer that
 * breaks the rules (the communicator's framing and budget, the guard, the step
 * checks: each is handed this as its MisbehaviourSink) is reported once; the
 * server ejects it once a majority of its voters reported it. Voters are the
 * members the server was told trained with the others: a session attests its
 * ring after the first collective that needs every member's data at every
 * rank. A member that never opened its data channels, and a rank that aborted
 * the ring with a false claim that a peer went away, are reported here too.
 */
import type { Communicator, LinkCommunicator } from '../../comm/communicator.ts';
import type { Misbehaviour, MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now, type EventBus } from '../../core/events.ts';
import type { Membership, SignalingClient } from '../../signaling/client.ts';
import type { GuardedRing, ServerLink } from './server-link.ts';
import { proofOf, provenRelayer } from './signed-gather.ts';

export class PeerReports implements MisbehaviourSink {
  /** Peer ids this peer already reported (once is enough). */
  private readonly reported = new Set<string>();
  /** This rank's own offence, reported once its ring is closed (confess). */
  private confession: { client: SignalingClient; reason: string } | null = null;
  /** The ring (server epoch) this peer has already attested. */
  private attested: { client: SignalingClient; epoch: number } | null = null;

  constructor(
    private readonly server: ServerLink,
    private readonly ring: () => GuardedRing,
    private readonly events: EventBus,
  ) {
    events.on((e) => {
      // The step checks' allgather needs every member's data at every rank, like a whole step, and
      // comes first in a step: a peer that breaks the rules at its first step is then a voter's
      // peer, and can be ejected (nobody could be in a job that had no voters yet).
      const together =
        e.type === 'train-step' || (e.type === 'collective-end' && e.ok && e.name === 'gradient-sketches');
      if (together && e.rank === this.ring().membership?.rank) this.attest();
    });
  }

  peerMisbehaved(finding: Misbehaviour): void {
    this.report(finding.peer, finding.reason);
  }

  /**
   * After the first collective on a ring that needs every member's data at every rank, tell the
   * server: it vouches for each member (what makes members voters, and only voters' reports
   * count). A ring built on an earlier server connection vouches for nothing now.
   */
  private attest(): void {
    const { membership, generation } = this.ring();
    const client = this.server.current;
    if (!membership || generation !== this.server.generation || client.closed) return;
    const epoch = membership.epoch;
    if (this.attested?.client === client && this.attested.epoch === epoch) return;
    this.attested = { client, epoch };
    client.attest(epoch);
  }

  /**
   * A peer that broke the rules on our ring: ask the server to eject it; a majority of the other
   * peers' reports does. This rank itself is kept for confess().
   */
  private report(rank: number, reason: string): void {
    const membership = this.ring().membership;
    const peer = membership?.peers[rank];
    if (!membership || !peer || this.reported.has(peer.peerId)) return;
    this.reported.add(peer.peerId);
    if (rank === membership.rank) {
      this.confession = { client: this.server.current, reason };
      return;
    }
    this.server.notice(`reporting rank ${rank}${peer.name ? ` (${peer.name})` : ''} to the server: ${reason}`);
    this.server.current.report(peer.peerId, reason);
  }

  /**
   * The checks name this rank too when its own contribution broke the rules: every rank judges the
   * same gathered numbers. Once its ring is closed (what it owed the others delivered, so they can
   * judge too), it reports itself, which the server takes as a confession and ejects it at once: a
   * majority of the others' votes forms only when every other rank got every number, and a rank
   * whose ring broke first would leave the job waiting out the liveness window, then stopping.
   */
  confess(): void {
    const c = this.confession;
    this.confession = null;
    const me = this.ring().membership;
    if (!c || !me || c.client !== this.server.current || c.client.closed) return;
    this.server.notice(`this peer's own contribution broke the rules (${c.reason}): reporting itself to the server`);
    c.client.report(me.peers[me.rank].peerId, c.reason);
  }

  /**
   * Opening the data channels of `membership` failed with `err`: reports every member it names
   * as never having opened its channel (no signal at all, or no path) that is not a voter (a
   * voter's link failing is the network's doing). False when there is none to report.
   */
  reportUnconnected(err: RingtrainError, membership: Membership, client: SignalingClient): boolean {
    const d = err.detail ?? {};
    const ranks = Array.isArray(d.waitingFor)
      ? (d.waitingFor as number[])
      : typeof d.peer === 'number' && err.code !== ErrorCode.Aborted
        ? [d.peer]
        : [];
    const suspects = ranks
      .map((r) => membership.peers[r])
      .filter((p) => p && p.voter !== true && p.rank !== membership.rank);
    if (suspects.length === 0) return false;
    for (const p of suspects) {
      if (this.reported.has(p.peerId)) continue;
      this.reported.add(p.peerId);
      const reason = `never opened a data channel in epoch ${membership.epoch} (${err.message.slice(0, 120)})`;
      this.server.notice(
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
    return true;
  }

  /**
   * Called once no one left the job within the server's liveness window after the ring broke:
   * reports every rank that told this one, in its own name, that a peer went away (the
   * communicator's lossClaims: each false, since no one left); false when there is none. Each
   * honest rank reports what it heard itself, so the server's majority forms without hearsay.
   */
  reportFalseAbort(links: LinkCommunicator | null): boolean {
    const claims = links?.lossClaims;
    const membership = this.ring().membership;
    if (!claims?.size || !membership) return false;
    for (const [peer, reason] of claims) {
      this.report(peer, reason);
      // Named like any other rule-breaker on the timeline and the page.
      this.events.emit({ type: 'peer-misbehaved', t: now(), rank: membership.rank, peer, reason });
    }
    return true;
  }

  /**
   * After the ring broke: every relay proof another rank's abort note carried that holds on `comm`'s
   * ring (signed-gather.ts) names its relayer here too, so the honest ranks' reports make the majority
   * that ejects it. A proof that does not hold names no one.
   */
  async judgeRelayProofs(comm: Communicator | undefined, links: LinkCommunicator | null): Promise<void> {
    const membership = this.ring().membership;
    if (!comm || !links?.relayProofs.length || !membership) return;
    for (const heard of links.relayProofs) {
      const proof = proofOf({ relayProof: heard });
      const relayer = proof ? await provenRelayer(comm, proof) : null;
      if (relayer === null || relayer === membership.rank) continue;
      const reason = `step ${proof!.step}: it passed on rank ${proof!.author}'s ${proof!.name} block changed, under its own signature (proof from another rank's abort)`;
      this.report(relayer, reason);
      this.events.emit({ type: 'peer-misbehaved', t: now(), rank: membership.rank, peer: relayer, reason });
    }
  }

  /** Session.judgeLossClaims, for the ring over `links` (a fixed job's). */
  async judgeLossClaims(links: LinkCommunicator | null): Promise<RingtrainError | null> {
    const ring = this.ring().membership;
    if (!links?.lossClaims.size || !ring) return null;
    const client = this.server.current;
    // The peers said to be gone, by peer id: a rank of the broken ring may be another peer's in a later membership.
    const claimed = [...links.claimedLost.values()]
      .map((r) => ring.peers[r]?.peerId)
      .filter((id): id is string => id !== undefined);
    const windowMs = client.heartbeatMs * (client.missedHeartbeats + 2);
    const oneLeft = (m: Membership) => claimed.some((id) => !m.peers.some((p) => p.peerId === id));
    const left = await client.nextMembership(oneLeft, windowMs).then(
      () => true,
      () => false,
    );
    if (left || client.closed) return null;
    this.reportFalseAbort(links);
    const culprits = [...links.lossClaims.keys()];
    const who = culprits.map((r) => `rank ${r}${ring.peers[r]?.name ? ` (${ring.peers[r].name})` : ''}`);
    return new RingtrainError(
      ErrorCode.PeerMisbehaved,
      `${who.join(' and ')} aborted the ring saying a peer went away, but every peer it named was still in the job ${Math.round(windowMs / 1000)} s later: a false abort, reported to the server. The job is not elastic, so it stops: resume from the recovery checkpoint without ${who.length > 1 ? 'them' : 'it'}`,
      { peer: culprits[0], culprits },
    );
  }
}
