/**
 * init(): how a peer enters a job, in any runtime. Join the job on the
 * signaling server, wait until it has enough peers, then open WebRTC data
 * channels to every other rank of that membership epoch and wrap them in a
 * communicator. Horovod's hvd.init(), with the server in place of mpirun.
 *
 * The WebSocket and RTCPeerConnection implementations are injected, so this
 * file runs in the browser as is; session.node.ts fills them in for Node and
 * Deno. A session is three parts: its server link (server-link.ts: the job's
 * settings, peers leaving, an elastic job's reconnection when the server goes
 * away), its ring former (ring-former.ts: the data channels of each
 * membership) and its peer reports (peer-reports.ts: what it tells the server
 * about rule-breakers, the sink every finder is handed). Epochs count across
 * server connections as `{ generation, epoch }` (ring-epoch.ts).
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import { isRingtrainError, type RingtrainError } from '../../core/errors.ts';
import { EventBus, type LinkTransport } from '../../core/events.ts';
import { connect, type Membership, type SignalingClient } from '../../signaling/client.ts';
import { FINISHED_LEAVE_REASON, type JobConfig, type PeerLeftMsg } from '../../signaling/protocol.ts';
import { PeerReports } from './peer-reports.ts';
import { RingFormer } from './ring-former.ts';
import { newSigningKeys } from './ring-keys.ts';
import { ServerLink } from './server-link.ts';
import type { InitOptions, Session } from './session-types.ts';
import type { JobSettings } from '../../job/settings.ts';
import type { ElasticHooks } from '../train/trainer-types.ts';

export type { InitOptions, Session } from './session-types.ts';

const BROKEN_RING_LINGER_MS = 1000;
/** The leave reason of a peer that completed its training (see the server link's peer-left handler). */
export const FINISHED = FINISHED_LEAVE_REASON;

class PeerSession implements Session {
  readonly server: ServerLink;
  readonly ring: RingFormer;
  private readonly reports: PeerReports;
  readonly elastic: ElasticHooks;
  private readonly closeHandlers: (() => void | Promise<void>)[] = [];

  constructor(
    client: SignalingClient,
    readonly events: EventBus,
    o: InitOptions,
  ) {
    const notice = o.onNotice ?? ((line: string) => console.warn(`ringtrain: ${line}`));
    this.server = new ServerLink(client, o, events, notice, () => this.ring);
    this.reports = new PeerReports(this.server, () => this.ring, events);
    this.ring = new RingFormer(this.server, this.reports, o, events);
    this.elastic = {
      currentEpoch: () => ({ generation: this.ring.generation, epoch: this.membership.epoch }),
      latestEpoch: () => ({ generation: this.server.generation, epoch: this.server.current.membership?.epoch ?? 0 }),
      regroup: (minEpoch) => this.ring.regroup(minEpoch),
    };
  }

  get misbehaviour(): MisbehaviourSink {
    return this.reports;
  }
  get comm(): Communicator {
    return this.ring.comm!;
  }
  get membership(): Membership {
    return this.ring.membership!;
  }
  get links(): LinkTransport[] {
    return this.ring.links;
  }
  get client(): SignalingClient {
    return this.server.current;
  }
  get rank(): number {
    return this.membership.rank;
  }
  get size(): number {
    return this.membership.size;
  }
  get job(): { id: string; config: JobConfig } {
    return this.server.current.job;
  }
  get settings(): JobSettings {
    return this.server.settings;
  }

  onPeerLeft(handler: (p: PeerLeftMsg) => void): void {
    this.server.onPeerLeft(handler);
  }

  judgeLossClaims(): Promise<RingtrainError | null> {
    // An elastic job's regroup judges the claims and goes on.
    if (this.settings.membership.elastic) return Promise.resolve(null);
    return this.reports.judgeLossClaims(this.ring.linkComm);
  }

  onClose(handler: () => void | Promise<void>): void {
    this.closeHandlers.push(handler);
  }

  async close(reason?: string): Promise<void> {
    this.server.closing = true;
    try {
      // A broken ring lingers a moment before its channels go: the other ranks are still
      // hearing why it broke (the server's peer-left, our abort frame), and our channels
      // closing first would read to them as if we were the one who went away.
      const broken = this.ring.comm?.error;
      if (broken) await new Promise((r) => setTimeout(r, BROKEN_RING_LINGER_MS));
      await this.ring.comm?.close();
      // Leaving because the ring broke: say what broke it, so a rank that hears of our leave
      // before the original cause still names the peer that started it.
      await this.client.leave(broken && reason !== FINISHED ? `${reason ?? 'stopped'}: ${broken.message}` : reason);
    } finally {
      for (const handler of this.closeHandlers.splice(0)) await handler();
    }
  }
}

export async function init(given: InitOptions): Promise<Session> {
  // The key this peer signs its check values with; the server hands its public half to the others (ring-keys.ts).
  const signing = given.signing ?? (await newSigningKeys());
  const o: InitOptions = { ...given, signing, signingKey: signing?.publicText };
  const events = o.events ?? new EventBus();
  const client = await connect(o.server, { ...o, events });
  const session = new PeerSession(client, events, o);
  try {
    // A job whose settings this peer cannot read is refused here, naming the setting, before the ring.
    const settings = session.settings;
    await o.beforeRing?.(client.job, settings);
    session.server.answerProbes(client);
    if (client.candidacy)
      session.server.notice(
        `joining a running job: echoing with the would-be ring neighbours before the server admits this peer (within ${client.candidacy.deadlineMs} ms of the join)`,
      );
    await session.ring.connect(await client.waitForReady(o.readyTimeoutMs ?? 600_000));
    return session;
  } catch (err) {
    await client.leave(isRingtrainError(err) ? err.code : 'init failed');
    throw err;
  }
}
