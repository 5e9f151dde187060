/**
 * A job (room): its config, its members in rank order, and the membership
 * epoch. Knows nothing of sockets: a member is anything that can be sent a
 * server message. Every join and every leave bumps the epoch and tells every
 * member the new membership, so a ring can be re-formed for the next epoch.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  FINISHED_LEAVE_REASON,
  PeerLeftReason,
  SignalErrorCode,
  type Capabilities,
  type JobSpec,
  type MembershipMsg,
  type Progress,
  type PublicJobInfo,
  type ServerMessage,
  type ShownProgress,
} from '../src/signaling/protocol.ts';
import { parseJobSettings, type JobSettings } from '../src/job/settings.ts';
import { DEFAULT_ADMISSION_LIMITS } from './admission.ts';
import { Candidates, type CandidateLimits } from './candidates.ts';

/** Bytes of each epoch's TCP link key (HMAC-SHA256 keys gain nothing past the hash's 32 bytes). */
const LINK_KEY_BYTES = 32;

/** Fewest distinct reporters that can eject a peer. */
export const MIN_REPORTERS = 2;

/** How far a claimed speed may exceed the pace of a peer's own progress reports before it is not shown. */
export const PLAUSIBLE_PACE_SLACK = 5;

export interface Member {
  readonly peerId: string;
  readonly runtime: 'browser' | 'deno' | 'node';
  readonly name?: string;
  readonly capabilities?: Capabilities;
  /** The public key it signs its check values with, handed to every member in the membership. */
  readonly signingKey?: string;
  readonly joinedAt: number;
  /** Who it is for the per-address limit (admission.ts addressKey). */
  readonly address?: string;
  progress?: ShownProgress;
  /** Its first accepted progress report: the pace of its later reports is measured from it. */
  progressOrigin?: { step: number; at: number };
  send(msg: ServerMessage): void;
  /** Puts this member out of the job for breaking the rules (a fatal error, then the socket closes). */
  eject(why: string): void;
  /** Turns this peer away (a fatal error with `code`, then the socket closes): a candidate past its deadline. */
  refuse(code: SignalErrorCode, message: string): void;
}

/** A member as ServerOptions.onMembership tells it: its rank and the name it joined under. */
export interface MembershipPeer {
  rank: number;
  name?: string;
}

export class Job {
  readonly id: string;
  readonly config: JobSpec['config'];
  /** The config's hyperparameters, checked (startServer's addJob refused a job whose settings do not parse). */
  readonly settings: JobSettings;
  /** The job's own STUN/TURN servers; undefined: the server's. */
  readonly ice: JobSpec['ice'];
  private readonly token: Buffer;
  private members: Member[] = [];
  epoch = 0;
  started = false;
  /** A peer left having completed its training; cleared by the next join (the job runs again). */
  private finished: PublicJobInfo['finished'];
  signalsRelayed = 0;
  /** Who reported whom (peer ids): accused → reporters still in the job. */
  private reports = new Map<string, Map<string, string>>();
  /** Peer ids ejected from this job; a join never reuses one, and a report of one is moot. */
  readonly ejected = new Set<string>();
  /**
   * Members that proved they train with the others (every member of an epoch attested that
   * epoch's ring completed a step). Only their reports count, and only they are counted:
   * sockets that join and never open a data channel cannot outvote the peers that train.
   */
  private readonly voters = new Set<string>();
  /** Members that attested the current epoch; cleared when the epoch moves on. */
  private attested = new Set<string>();
  /** Members one address may hold here; 0: no limit. */
  private readonly maxPerAddress: number;
  /** Joiners of the running job still proving their links (staged admission): no membership names them. */
  readonly candidates: Candidates<Member>;

  /** Told of every membership change (ServerOptions.onMembership). */
  private readonly onMembership:
    ((peers: readonly MembershipPeer[], change: MembershipMsg['change']) => void) | undefined;

  constructor(
    spec: JobSpec,
    defaults: {
      maxPeersPerAddress?: number;
      candidates?: CandidateLimits;
      onMembership?: (peers: readonly MembershipPeer[], change: MembershipMsg['change']) => void;
    } = {},
  ) {
    this.onMembership = defaults.onMembership;
    this.id = spec.id;
    this.config = spec.config;
    this.settings = parseJobSettings(spec.config.hyperparameters);
    this.ice = spec.ice;
    this.token = Buffer.from(spec.token, 'utf8');
    this.maxPerAddress = spec.config.maxPeersPerAddress ?? defaults.maxPeersPerAddress ?? 0;
    this.candidates = new Candidates(
      this.id,
      defaults.candidates ?? DEFAULT_ADMISSION_LIMITS,
      this.settings.membership.admitTimeoutMs,
    );
  }

  /**
   * Whether a joiner must prove its links before it is a member: once the job has started and
   * has voters (a ring that trained a step). Before that there is no ring a ghost could stall
   * (the first formation waits for its start quorum anyway) and no member that trains to vouch
   * for a joiner, so joiners are members at once; `admitTimeoutMs: 0` turns proving off.
   */
  get provesJoiners(): boolean {
    return this.started && this.voters.size > 0 && this.settings.membership.admitTimeoutMs !== 0;
  }

  /** Members and candidates: who holds a name, a place under maxPeers, a slot of its address. */
  private get everyone(): Member[] {
    return [...this.members, ...this.candidates.members()];
  }

  get size(): number {
    return this.members.length;
  }

  /** Before the first step the job waits for its start quorum; once started, minPeers keep it going. */
  get ready(): boolean {
    const needed = this.started ? this.config.minPeers : Math.max(this.config.minPeers, this.config.startPeers ?? 0);
    return this.members.length >= needed;
  }

  /** Compares in constant time, so response timing does not leak the token. */
  tokenMatches(token: string): boolean {
    const given = Buffer.from(token, 'utf8');
    return given.length === this.token.length && timingSafeEqual(given, this.token);
  }

  /** Why `token` (from `address`, named `name`) may not join now, or null when it may. */
  refusal(token: string, address?: string, name?: string): { code: SignalErrorCode; message: string } | null {
    if (!this.tokenMatches(token)) {
      return {
        code: SignalErrorCode.BadToken,
        message: `wrong token for job '${this.id}'; ask the job's owner for its token`,
      };
    }
    // Names say who is who in reports, logs and the page: two members with one name would let
    // one pass for the other. Refused rather than renamed, so a name always means the peer that chose it.
    if (name !== undefined && this.everyone.some((m) => m.name === name)) {
      return {
        code: SignalErrorCode.NameTaken,
        message: `a member of job '${this.id}' is already named '${name}'; join with another name (--name)`,
      };
    }
    if (
      this.maxPerAddress > 0 &&
      address !== undefined &&
      this.everyone.filter((m) => m.address === address).length >= this.maxPerAddress
    ) {
      return {
        code: SignalErrorCode.TooManyFromAddress,
        message: `job '${this.id}' already holds ${this.maxPerAddress} member(s) from your address (maxPeersPerAddress); run fewer peers from one machine or ask the job's owner to raise it`,
      };
    }
    if (this.everyone.length >= this.config.maxPeers) {
      return {
        code: SignalErrorCode.JobFull,
        message: `job '${this.id}' is full (maxPeers ${this.config.maxPeers}); wait for a peer to leave or start a job with more peers`,
      };
    }
    return this.provesJoiners ? this.candidates.refusal(address) : null;
  }

  /** Whether anyone may see this job (GET /api/jobs), not only its token's holders. */
  get isPublic(): boolean {
    return this.config.public === true;
  }

  /**
   * Why a progress report from `member` (about itself: the connection it came
   * on says who) must not be shown, or null. The server cannot check a loss,
   * but it can check that steps never go backwards and stay within the job.
   */
  progressRefusal(
    member: Member,
    p: Progress,
  ): { reason: 'step-backwards' | 'beyond-last-step'; message: string } | null {
    const last = member.progress?.step;
    if (last !== undefined && p.step < last) {
      return {
        reason: 'step-backwards',
        message: `progress refused: step ${p.step} after step ${last}; steps only grow`,
      };
    }
    const lastStep = this.settings.schedule.steps;
    if (lastStep !== undefined && p.step > lastStep) {
      return {
        reason: 'beyond-last-step',
        message: `progress refused: step ${p.step} is past the job's last step (${lastStep})`,
      };
    }
    return null;
  }

  /**
   * What is shown of an accepted report (progressRefusal passed it): all of it, marked as the
   * peer's own word, except a speed the pace of its own reports does not bear out. A peer's
   * samplesPerS is the ring's examples per second, so it can be at most the ring's examples per
   * step times the steps per second its reports advanced since its first one (PLAUSIBLE_PACE_SLACK
   * times that, for evaluations and waits its own clock leaves out). The first report has no pace
   * yet, so its speeds are not shown: one report of 1e12 samples/s would otherwise stand.
   */
  showProgress(member: Member, p: Progress, now: number): ShownProgress {
    const origin = (member.progressOrigin ??= { step: p.step, at: now });
    const seconds = (now - origin.at) / 1000;
    const stepsPerS = seconds > 0 ? (p.step - origin.step) / seconds : 0;
    const examplesPerStep = this.settings.schedule.globalBatch ?? this.config.batchPerPeer * this.config.maxPeers;
    const limits = {
      stepsPerS: PLAUSIBLE_PACE_SLACK * stepsPerS,
      samplesPerS: PLAUSIBLE_PACE_SLACK * stepsPerS * examplesPerStep,
    };
    // A step's report carries no accuracy: the last evaluation's figures stay shown until the next one.
    const kept: Pick<Progress, 'testAccuracy' | 'testLoss'> = {};
    if (p.testAccuracy === undefined && p.testLoss === undefined) {
      if (member.progress?.testAccuracy !== undefined) kept.testAccuracy = member.progress.testAccuracy;
      if (member.progress?.testLoss !== undefined) kept.testLoss = member.progress.testLoss;
    }
    const shown: ShownProgress = { ...kept, ...p, at: now, selfReported: true };
    const dropped = (['samplesPerS', 'stepsPerS'] as const).filter((k) => p[k] !== undefined && p[k] > limits[k]);
    for (const k of dropped) delete shown[k];
    if (dropped.length) shown.dropped = dropped;
    return shown;
  }

  rankOf(member: Member): number {
    return this.members.indexOf(member);
  }

  memberAt(rank: number): Member | undefined {
    return this.members[rank];
  }

  add(member: Member): void {
    this.finished = undefined;
    this.members.push(member);
    this.bump({ kind: 'join', peerId: member.peerId, name: member.name });
  }

  /** A joiner that passed `refusal`: a member at once, or a candidate while the job proves joiners. */
  join(member: Member): 'member' | 'candidate' {
    if (!this.provesJoiners) {
      this.add(member);
      return 'member';
    }
    this.candidates.propose(member, this.neighbours(), (m) =>
      m.refuse(
        SignalErrorCode.AdmitTimeout,
        `not admitted to job '${this.id}': no link and echo with your would-be ring neighbours within ${this.settings.membership.admitTimeoutMs} ms of joining (admitTimeoutMs; a joiner loads its data and compiles first); check that WebRTC or TCP reaches the other peers, or ask the job's owner to raise admitTimeoutMs, then join again`,
      ),
    );
    return 'candidate';
  }

  /** A joiner's would-be ring neighbours: it joins at the end of the ring, between the last rank and rank 0. */
  private neighbours(): Member[] {
    const ends = [this.members[this.members.length - 1], this.members[0]].filter((m) => m !== undefined);
    return [...new Set(ends)];
  }

  /** Relays a probe signal between a candidate and a member, or says why not. */
  probeSignal(
    from: Member,
    probe: number,
    data: NonNullable<unknown>,
  ): { code: SignalErrorCode; message: string } | null {
    return this.candidates.relay(from, probe, data);
  }

  /** `from` got its echo back on probe `probe`; returns the candidate this admitted, if any. */
  probeOk(from: Member, probe: number): Member | null {
    if (!this.members.includes(from)) return null;
    const admitted = this.candidates.ok(from, probe);
    if (admitted) this.add(admitted);
    return admitted;
  }

  isVoter(member: Member): boolean {
    return this.voters.has(member.peerId);
  }

  /**
   * `reporter` says the peer `accusedId` broke the rules. One peer's word is not enough (it
   * may itself be the liar): the accused is ejected once more than half of the other voters,
   * and at least MIN_REPORTERS of them, reported it, or at once when it reported itself. A report from a member that is not (yet)
   * a voter is kept and counts once it is one. Returns the ejected member, if this report ejected one.
   */
  report(reporter: Member, accusedId: string, reason: string): Member | null {
    const accused = this.members.find((m) => m.peerId === accusedId);
    if (!accused || !this.members.includes(reporter)) return null;
    // A confession: the one report that cannot be a liar's move against another peer.
    if (accused === reporter) return this.ejectNow(accused, `it reported itself: ${reason}`);
    const by = this.reports.get(accusedId) ?? new Map<string, string>();
    by.set(reporter.peerId, reason);
    this.reports.set(accusedId, by);
    return this.judge(accused);
  }

  /** Ejects `accused` if enough voters reported it; returns it then. */
  private judge(accused: Member): Member | null {
    const by = this.reports.get(accused.peerId);
    if (!by) return null;
    const votes = [...by.keys()].filter((id) => this.voters.has(id) && id !== accused.peerId);
    const others = this.members.filter((m) => m !== accused && this.voters.has(m.peerId)).length;
    // Two reporters at least: in a job of two, one word against another proves nothing.
    if (votes.length < MIN_REPORTERS || votes.length * 2 <= others) return null;
    return this.ejectNow(
      accused,
      `reported by ${votes.length} of the other ${others} voting peers: ${by.get(votes[votes.length - 1])}`,
    );
  }

  private ejectNow(accused: Member, why: string): Member {
    this.ejected.add(accused.peerId);
    accused.eject(why);
    return accused;
  }

  /**
   * `member` completed a step on the ring of `epoch`. A step needs every member's data over
   * a data channel to each, so when every member of the current epoch says so, each of them
   * trains with the others: all become voters. Anything but the current epoch is moot (its
   * ring is gone). Returns the members that became voters.
   */
  attest(member: Member, epoch: number): Member[] {
    if (epoch !== this.epoch || !this.members.includes(member)) return [];
    this.attested.add(member.peerId);
    if (!this.members.every((m) => this.attested.has(m.peerId))) return [];
    const promoted = this.members.filter((m) => !this.voters.has(m.peerId));
    for (const m of promoted) this.voters.add(m.peerId);
    // Reports made before their makers could vote count now.
    if (promoted.length) for (const m of [...this.members]) if (this.members.includes(m)) this.judge(m);
    return promoted;
  }

  /** Removes `member` (no-op if gone): peer-left first, then the new membership. */
  remove(member: Member, reason: PeerLeftReason, detail?: string): boolean {
    // A candidate was never in a membership: nobody hears of it going.
    if (this.candidates.remove(member)) return false;
    const rank = this.members.indexOf(member);
    if (rank < 0) return false;
    this.members.splice(rank, 1);
    if (reason === PeerLeftReason.Left && detail === FINISHED_LEAVE_REASON)
      this.finished = { at: Date.now(), progress: member.progress };
    // A departed peer neither stands accused nor counts as a reporter any more.
    this.reports.delete(member.peerId);
    this.voters.delete(member.peerId);
    for (const by of this.reports.values()) by.delete(member.peerId);
    // An empty job is no longer running: whoever comes next starts it afresh.
    if (this.members.length === 0) this.started = false;
    const left: ServerMessage = {
      type: 'peer-left',
      epoch: this.epoch,
      peerId: member.peerId,
      rank,
      name: member.name,
      reason,
      detail,
    };
    for (const m of [...this.members]) m.send(left);
    this.bump({
      kind: 'leave',
      peerId: member.peerId,
      name: member.name,
      reason: detail ? `${reason}: ${detail}` : reason,
    });
    // Candidates that were to echo with it probe its successor; any left with nothing to prove is admitted.
    for (const admitted of this.candidates.memberLeft(member, () => this.neighbours())) this.add(admitted);
    return true;
  }

  private bump(change: MembershipMsg['change']): void {
    this.epoch++;
    this.attested = new Set();
    if (this.ready) this.started = true;
    const peers = this.members.map((m, rank) => ({
      rank,
      peerId: m.peerId,
      runtime: m.runtime,
      name: m.name,
      voter: this.voters.has(m.peerId),
      ...(m.signingKey ? { signingKey: m.signingKey } : {}),
    }));
    // Before any member hears of it: whoever watches in-process (the launcher) knows a rank before its holder does.
    this.onMembership?.(
      peers.map((p) => ({ rank: p.rank, name: p.name })),
      change,
    );
    const ring = peers.map((p) => p.rank);
    // A fresh key per epoch: a member that left (or was ejected) cannot open a TCP link in a later one.
    const linkKey = randomBytes(LINK_KEY_BYTES).toString('base64');
    for (const [rank, m] of [...this.members].entries()) {
      m.send({
        type: 'membership',
        epoch: this.epoch,
        peers,
        ring,
        you: rank,
        size: peers.length,
        ready: this.ready,
        started: this.started,
        change,
        // Only native peers can listen for TCP links; a page never needs the key.
        ...(m.runtime === 'browser' ? {} : { linkKey }),
      });
    }
  }

  /** Relays a signal from `from` to rank `to` of the current epoch, or says why not. */
  relay(
    from: Member,
    epoch: number,
    to: number,
    data: NonNullable<unknown>,
  ): { code: SignalErrorCode; message: string } | null {
    if (epoch !== this.epoch) {
      return {
        code: SignalErrorCode.StaleEpoch,
        message: `signal for epoch ${epoch} dropped: job '${this.id}' is at epoch ${this.epoch}; use the latest membership`,
      };
    }
    const fromRank = this.members.indexOf(from);
    if (fromRank < 0) {
      return {
        code: SignalErrorCode.NotAMember,
        message: `signal dropped: you are not a member of job '${this.id}' yet (a candidate signals only for its probes)`,
      };
    }
    const target = this.members[to];
    if (!target || target === from) {
      return {
        code: SignalErrorCode.NoSuchRank,
        message: `no rank ${to} to signal in epoch ${epoch} of job '${this.id}' (size ${this.size}, you are rank ${fromRank})`,
      };
    }
    target.send({ type: 'signal', epoch, from: fromRank, data });
    this.signalsRelayed++;
    return null;
  }

  info(): PublicJobInfo {
    return {
      id: this.id,
      config: this.config,
      epoch: this.epoch,
      size: this.size,
      ready: this.ready,
      started: this.started,
      ...(this.finished ? { finished: this.finished } : {}),
      ...(this.candidates.size ? { candidates: this.candidates.size } : {}),
      peers: this.members.map((m, rank) => ({
        rank,
        peerId: m.peerId,
        runtime: m.runtime,
        name: m.name,
        capabilities: m.capabilities,
        joinedAt: m.joinedAt,
        progress: m.progress,
        voter: this.voters.has(m.peerId),
      })),
    };
  }
}
