/**
 * What init() takes and what it gives back (session.ts), apart from the parts
 * that implement it, so that the parts and the callers import the shapes alone.
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import type { TcpEndpoint } from '../../comm/tcp-endpoint.ts';
import type { RingtrainError } from '../../core/errors.ts';
import type { EventBus, LinkTransport } from '../../core/events.ts';
import type { ConnectOptions, Membership, SignalingClient } from '../../signaling/client.ts';
import type { JobConfig, PeerLeftMsg } from '../../signaling/protocol.ts';
import type { JobSettings } from '../../job/settings.ts';
import type { SigningKeys } from './ring-keys.ts';
import type { ElasticHooks } from '../train/trainer-types.ts';

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
  /**
   * Called with the job's config and its settings (parsed once) once the server welcomed us, before any ring
   * forms; throwing leaves the job (e.g. a --resume that does not fit).
   */
  beforeRing?: (job: { id: string; config: JobConfig }, settings: JobSettings) => void | Promise<void>;
  /** How long to wait for the job to gather its minimum number of peers. Default 10 minutes. */
  readyTimeoutMs?: number;
  /** How long one attempt to open the data channels may take. Default: the job's `connectTimeoutMs` hyperparameter (30 s if absent). */
  connectTimeoutMs?: number;
  /** A silent peer counts as gone after this long (ms). Default: the job's `peerTimeoutMs` hyperparameter, else the communicator's. */
  peerTimeoutMs?: number;
  /**
   * Elastic jobs: how long the ring trains on without its signaling server while
   * reconnecting, before it stops (ms). Default: the job's `serverWaitMs`
   * hyperparameter (its default: src/job/fields.ts).
   */
  serverWaitMs?: number;
  /** Lines worth telling a person (the server went away and came back...). Default console.warn. */
  onNotice?: (line: string) => void;
  /** The key pair this peer signs its check values with (ring-keys.ts). Default: init() makes one. */
  signing?: SigningKeys;
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
