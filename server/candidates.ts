/**
 * Staged admission: the joiners of a running job that have not proved themselves yet
 * (src/signaling/protocol.ts, "Staged admission"). A candidate is no member: no membership
 * names it, so no ring waits for it. It proves itself by opening a real link to each of its
 * would-be ring neighbours and echoing a nonce the neighbour sends over it; the neighbour says
 * `probe-ok`. Once every probe of a candidate is ok, it is handed back to be admitted (the job
 * adds it and re-forms); a candidate still unproved at its deadline is refused (`admit-timeout`).
 *
 * Why the ring no longer stalls on ghosts: a socket that joins and never opens a data channel
 * stays a candidate until its deadline and is dropped, and the members only ever run its probe
 * beside training.
 */
import { randomBytes } from 'node:crypto';
import { SignalErrorCode, type ServerMessage } from '../src/signaling/protocol.ts';

/** What the bookkeeping needs of a peer (jobs.ts's Member is one). */
export interface ProbeEnd {
  readonly peerId: string;
  readonly runtime: 'browser' | 'deno' | 'node';
  readonly name?: string;
  /** Who it is for the per-address limits (admission.ts addressKey). */
  readonly address?: string;
  send(msg: ServerMessage): void;
}

/** Bytes of a probe's TCP link key (as an epoch's: HMAC-SHA256 gains nothing past 32). */
const PROBE_KEY_BYTES = 32;

export interface CandidateLimits {
  /** Candidates one job may hold at once. */
  maxCandidates: number;
  /** Candidates one address may hold in one job at once. */
  maxCandidatesPerAddress: number;
}

interface Probe<Member extends ProbeEnd> {
  readonly id: number;
  readonly candidate: Candidate<Member>;
  /** The member at the other end (side 0: it sends the nonce and says probe-ok). */
  readonly partner: Member;
  ok: boolean;
}

interface Candidate<Member extends ProbeEnd> {
  readonly member: Member;
  probes: Probe<Member>[];
  readonly timer: ReturnType<typeof setTimeout>;
}

export class Candidates<Member extends ProbeEnd> {
  private readonly byPeer = new Map<string, Candidate<Member>>();
  private readonly probes = new Map<number, Probe<Member>>();
  private nextProbe = 1;

  constructor(
    private readonly jobId: string,
    private readonly limits: CandidateLimits,
    private readonly deadlineMs: number,
  ) {}

  get size(): number {
    return this.byPeer.size;
  }

  has(member: Member): boolean {
    return this.byPeer.get(member.peerId)?.member === member;
  }

  /** The candidates' members (for names and per-address counts). */
  members(): Member[] {
    return [...this.byPeer.values()].map((c) => c.member);
  }

  /** Why one more candidate from `address` may not join now, or null. */
  refusal(address: string | undefined): { code: SignalErrorCode; message: string } | null {
    if (this.byPeer.size >= this.limits.maxCandidates) {
      return {
        code: SignalErrorCode.TooManyCandidates,
        message: `job '${this.jobId}' already has ${this.limits.maxCandidates} joiner(s) proving their links (the server's candidate limit); try again in a few seconds`,
      };
    }
    const fromAddress = this.members().filter((m) => address !== undefined && m.address === address).length;
    if (address !== undefined && fromAddress >= this.limits.maxCandidatesPerAddress) {
      return {
        code: SignalErrorCode.TooManyCandidates,
        message: `job '${this.jobId}' already has ${this.limits.maxCandidatesPerAddress} joiner(s) from your address proving their links (the server's candidates per address); wait until they are admitted`,
      };
    }
    return null;
  }

  /**
   * Makes `member` a candidate: tells it so, and starts one probe with each of `neighbours`
   * (its would-be ring neighbours). `expired` runs if it has not proved itself by the deadline.
   */
  propose(member: Member, neighbours: readonly Member[], expired: (member: Member) => void): void {
    const timer = setTimeout(() => expired(member), this.deadlineMs);
    timer.unref?.();
    const candidate: Candidate<Member> = { member, probes: [], timer };
    this.byPeer.set(member.peerId, candidate);
    member.send({ type: 'candidate', deadlineMs: this.deadlineMs });
    for (const partner of neighbours) this.startProbe(candidate, partner);
  }

  private startProbe(candidate: Candidate<Member>, partner: Member): void {
    const probe: Probe<Member> = { id: this.nextProbe++, candidate, partner, ok: false };
    this.probes.set(probe.id, probe);
    candidate.probes.push(probe);
    const native = candidate.member.runtime !== 'browser' && partner.runtime !== 'browser';
    // A fresh key per probe, to native pairs only (as an epoch's): it opens this one TCP link and nothing else.
    const linkKey = native ? { linkKey: randomBytes(PROBE_KEY_BYTES).toString('base64') } : {};
    const about = (m: Member) => ({ peerId: m.peerId, runtime: m.runtime, ...(m.name ? { name: m.name } : {}) });
    partner.send({ type: 'probe', probe: probe.id, side: 0, peer: about(candidate.member), ...linkKey });
    candidate.member.send({ type: 'probe', probe: probe.id, side: 1, peer: about(partner), ...linkKey });
  }

  /** Relays a probe signal from one end of probe `id` to the other, or says why not. */
  relay(from: Member, id: number, data: NonNullable<unknown>): { code: SignalErrorCode; message: string } | null {
    const probe = this.probes.get(id);
    const other =
      probe?.partner === from ? probe.candidate.member : probe?.candidate.member === from ? probe.partner : null;
    if (!probe || !other) {
      return {
        code: SignalErrorCode.NoSuchRank,
        message: `no admission probe ${id} of yours in job '${this.jobId}' (it ended: its candidate was admitted or dropped)`,
      };
    }
    other.send({ type: 'probe-signal', probe: id, data });
    return null;
  }

  /**
   * `from` (the member end of probe `id`) got its nonce back over the link. Returns the
   * candidate's member once every one of its probes is ok (it is no candidate any more: admit it).
   */
  ok(from: Member, id: number): Member | null {
    const probe = this.probes.get(id);
    // Only the member end vouches: a candidate cannot say its own probe went well.
    if (!probe || probe.partner !== from) return null;
    probe.ok = true;
    const candidate = probe.candidate;
    if (!candidate.probes.every((p) => p.ok)) return null;
    this.forget(candidate);
    return candidate.member;
  }

  /** A candidate left or was refused: forgets it (false if it was none). */
  remove(member: Member): boolean {
    const candidate = this.byPeer.get(member.peerId);
    if (candidate?.member !== member) return false;
    this.forget(candidate);
    return true;
  }

  /**
   * A member left: the probes it was the member end of can never be ok. Each candidate that had
   * one probes its new neighbours instead (those it has no probe with yet). Returns the
   * candidates that have no probe left to wait for (every neighbour is proved): admit them.
   */
  memberLeft(member: Member, neighbours: () => readonly Member[]): Member[] {
    const ready: Member[] = [];
    for (const candidate of [...this.byPeer.values()]) {
      const gone = candidate.probes.filter((p) => p.partner === member);
      if (gone.length === 0) continue;
      for (const p of gone) this.probes.delete(p.id);
      candidate.probes = candidate.probes.filter((p) => p.partner !== member);
      for (const n of neighbours()) if (!candidate.probes.some((p) => p.partner === n)) this.startProbe(candidate, n);
      if (candidate.probes.every((p) => p.ok)) {
        this.forget(candidate);
        ready.push(candidate.member);
      }
    }
    return ready;
  }

  private forget(candidate: Candidate<Member>): void {
    clearTimeout(candidate.timer);
    this.byPeer.delete(candidate.member.peerId);
    for (const p of candidate.probes) this.probes.delete(p.id);
  }
}
