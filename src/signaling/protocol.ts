/**
 * The signaling protocol, shared by the server (`server/`) and the client
 * (`./client.ts`). Every frame is one JSON text message with a `type`.
 * The server validates every client message against these schemas.
 *
 * Version: `PROTOCOL_VERSION`, sent in `join` and echoed in `welcome`. A
 * server refuses a join with another version (`bad-version`).
 *
 * Client → server
 *   join      {protocol, job, token, runtime, name?, capabilities?, signingKey}   first message, exactly once;
 *                                      a name another member of the job holds is refused (name-taken),
 *                                      and so is a join beyond the job's members per address
 *                                      (too-many-from-address). `signingKey`: the public key its check
 *                                      values are signed with, handed to every member in `peers`
 *                                      (src/distributed/session/ring-keys.ts); a join without a
 *                                      valid one is refused (signing-key-required)
 *   signal    {epoch, to, data}        WebRTC offer/answer/candidate for rank `to` of epoch `epoch`,
 *                                      or the choice of a pair's transport (src/comm/link-choice.ts:
 *                                      the address a native peer listens on for TCP links)
 *   pong      {seq}                    answer to the server's ping
 *   progress  {step, loss?, ...}       this peer's training progress, shown by GET /api/jobs/:id;
 *                                      refused (bad-progress) when its step goes backwards or
 *                                      past the job's last step
 *   leave     {reason?}                clean goodbye; the server closes the socket after it
 *   report    {peerId, reason}         the peer `peerId` broke the rules on our ring (a bad frame,
 *                                      a flood, a poisoned gradient). When more than half of
 *                                      the job's other peers (and at least two) report the same peer, the server
 *                                      ejects it: a fatal `ejected` error, peer-left with reason
 *                                      `ejected` to the others, and that peer id never again.
 *                                      Only voters' reports count, and only voters are counted
 *                                      (see `attest`).
 *   attest    {epoch}                  this peer completed a training step on the ring of `epoch`
 *                                      (its current one). A step needs every member's data over a
 *                                      full mesh of data channels, so it vouches for every member
 *                                      of that epoch. Once every member of the current epoch has
 *                                      attested it, all of them are voters: their reports count
 *                                      towards ejection, and they count in its denominator. A
 *                                      member that never opens its data channels never becomes one.
 *   probe-signal {probe, data}         a signal of admission probe `probe` (see `probe`) to its other end
 *   probe-ok  {probe}                  the member end of probe `probe` got its echo back over the link
 *
 * Staged admission (version 2). A join to a job that has started and has voters makes the
 * joiner a **candidate**, not a member: it gets `welcome`, then `candidate`, then one `probe` per
 * would-be ring neighbour (the members at rank 0 and at the last rank), and each of those
 * members gets the matching `probe`. Both ends open a real link (TCP between native peers, else
 * WebRTC) over `probe-signal`s, the member sends a nonce, the candidate echoes it, and the
 * member says `probe-ok`. Once every probe of the candidate is ok the server admits it: a
 * membership with it follows, and the ring re-forms as for any join. A candidate that is not
 * admitted within the job's `admitTimeoutMs` gets a fatal `admit-timeout`: the members never
 * saw it in a membership, so their ring never waited for it. A job without voters (before its
 * first ring trained a step) admits joiners at once: it has no ring to stall and nobody that
 * trains to vouch. Candidates count against the job's maxPeers, its members per address, and
 * the server's candidate limits (`too-many-candidates`).
 *
 * Server → client
 *   welcome    {protocol, peerId, job: {id, config}, heartbeatMs, missedHeartbeats,
 *               iceServers?, iceTransportPolicy?}
 *              `iceServers` are the job's STUN and TURN servers, as RTCPeerConnection
 *              takes them. A TURN entry carries credentials minted for this peer
 *              alone and short-lived (TURN REST: username `<expiry unix s>:<peerId>`,
 *              credential base64(HMAC-SHA1(secret, username))); they are sent only
 *              here, never by /api/jobs or /metrics. `iceTransportPolicy: 'relay'`
 *              asks peers to connect through TURN only.
 *   membership {epoch, peers, ring, you, size, ready, started, change}
 *              sent to every peer of the job on every join and leave; `epoch`
 *              grows by one each time. Ranks are dense (0..size-1) in join
 *              order; a peer that stays keeps its relative order. `ring[i]` is
 *              the rank at ring position i. `ready` is true while size >= minPeers,
 *              and, until the job has started, also size >= startPeers (a start
 *              quorum: an elastic job may go on with fewer peers than it starts with);
 *              `started` becomes true the first time the job was ready and stays
 *              true until the job is empty again, so a peer joining later knows it
 *              joins a running job (the next epoch includes it: elastic training
 *              can re-form the ring). Native members (Node, Deno) also get `linkKey`:
 *              32 random bytes (base64), fresh every epoch, the same for every
 *              member of it; two peers that link by TCP prove they hold it
 *              (src/comm/tcp-handshake.node.ts). Pages never get it.
 *   peer-left  {epoch, peerId, rank, name?, reason, detail?}   sent before the
 *              membership that drops the peer; `epoch` and `rank` are those the
 *              peer had. `reason` is one of PeerLeftReason; `detail` is free text
 *              (the reason a leaving peer gave).
 *   signal     {epoch, from, data}     relayed only within one job and one epoch
 *   ping       {seq}                   heartbeat; answer with pong
 *   error      {code, message, fatal}  fatal errors are followed by a close
 *   candidate  {deadlineMs}            you are a candidate (see Staged admission): prove your links
 *                                      within deadlineMs; your first membership comes once you have
 *   probe      {probe, side, peer, linkKey?}   open a link to `peer` for probe `probe` and echo
 *                                      over it: side 0 (the member) sends the nonce, side 1 (the
 *                                      candidate) sends it back. `linkKey` (base64, native peers
 *                                      only) is the probe's TCP link key, as an epoch's is the ring's
 *   probe-signal {probe, data}         relayed from the other end of probe `probe`
 *
 * Liveness: the server pings every `heartbeatMs`; a peer silent for
 * `missedHeartbeats` intervals is dropped (reason `heartbeat`). The client
 * treats a server silent for as long as gone.
 */
import { z } from 'zod';

/** 2: staged admission (candidate, probe, probe-signal, probe-ok); a version-1 client would wait for a membership that never comes. */
export const PROTOCOL_VERSION = 2;

/** Default largest frame the server accepts (an SDP offer is a few KiB). */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024;

/** The path the server accepts WebSocket upgrades on. */
export const WS_PATH = '/ws';

/** Error codes of the protocol's `error` message (stable, for programs). */
export const SignalErrorCode = {
  BadJson: 'bad-json',
  BadMessage: 'bad-message',
  UnknownType: 'unknown-type',
  BadVersion: 'bad-version',
  NotJoined: 'not-joined',
  AlreadyJoined: 'already-joined',
  NoSuchJob: 'no-such-job',
  BadToken: 'bad-token',
  /** Too many wrong tokens from one address lately: wait a few seconds. */
  TooManyBadTokens: 'too-many-bad-tokens',
  JobFull: 'job-full',
  StaleEpoch: 'stale-epoch',
  NoSuchRank: 'no-such-rank',
  RateLimited: 'rate-limited',
  Flood: 'flood',
  TooLarge: 'too-large',
  JoinTimeout: 'join-timeout',
  SlowConsumer: 'slow-consumer',
  Heartbeat: 'heartbeat',
  ServerClosing: 'server-closing',
  /** Closed to make room: the server holds too many connections that have not joined. */
  ServerBusy: 'server-busy',
  /** A progress report the server will not show (a step going backwards, past the job's last step). */
  BadProgress: 'bad-progress',
  /** Most of the job's other peers reported this peer for breaking the rules: it is out of the job. */
  Ejected: 'ejected',
  /** Another member of the job holds this name: pick another (names say who is who in reports and logs). */
  NameTaken: 'name-taken',
  /** The job holds as many members from this address as it allows (maxPeersPerAddress). */
  TooManyFromAddress: 'too-many-from-address',
  /** The job (or the server, from this address) holds as many candidates as it allows: try again shortly. */
  TooManyCandidates: 'too-many-candidates',
  /** This candidate did not open its links and echo with its would-be neighbours within the job's admitTimeoutMs. */
  AdmitTimeout: 'admit-timeout',
  /** A message only members may send (a signal of an epoch) came from a candidate. */
  NotAMember: 'not-a-member',
  /** The join carried no signing key members can check (server/signing-key.ts): it would turn signing off for the ring. */
  SigningKeyRequired: 'signing-key-required',
} as const;
export type SignalErrorCode = (typeof SignalErrorCode)[keyof typeof SignalErrorCode];

/** Why a peer left a job (bounded, so metrics can label by it). */
export const PeerLeftReason = {
  /** It sent `leave`. */
  Left: 'left',
  /** Its socket closed without a `leave`. */
  Disconnected: 'disconnected',
  /** It missed heartbeats. */
  Heartbeat: 'heartbeat',
  /** The server closed it for flooding or for not reading its messages. */
  Dropped: 'dropped',
  /** The server is shutting down. */
  ServerClosing: 'server-closing',
  /** Most of the other peers reported it for breaking the rules (see `report`). */
  Ejected: 'ejected',
} as const;
export type PeerLeftReason = (typeof PeerLeftReason)[keyof typeof PeerLeftReason];

/** WebSocket close codes the server uses (4000-4999 is the application range). */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  /** A fatal protocol error; the preceding `error` message says which. */
  Refused: 4000,
  Flood: 4008,
  Heartbeat: 4009,
} as const;

const runtimeSchema = z.enum(['browser', 'deno', 'node']);
const rank = z
  .number()
  .int()
  .min(0)
  .max(1 << 20);
const epoch = z.number().int().min(0);
const shortText = z.string().min(1).max(128);
/** Names are shown on the page and in logs: no control characters. */
const nameText = shortText.regex(/^[^\x00-\x1f\x7f]+$/, 'no control characters');
/** Job ids and tokens: printable, no spaces, bounded. */
const idText = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');
/** WebRTC signals nest three or four levels; far deeper JSON is an attack on whoever serialises it. */
export const MAX_SIGNAL_DEPTH = 16;

/** Whether `value` nests objects/arrays more than `limit` deep (iterative: no recursion to overflow). */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

const signalData = z
  .unknown()
  .refine((d) => d !== undefined && d !== null, 'data is required')
  .refine((d) => !nestsDeeperThan(d, MAX_SIGNAL_DEPTH), `data nests deeper than ${MAX_SIGNAL_DEPTH} levels`);
const finite = z.number().finite();

/** What a peer can do; free-form beyond the known keys, but small. */
export const capabilitiesSchema = z
  .object({
    webgpu: z.boolean().optional(),
    adapter: z.string().max(256).optional(),
    fallbackAdapter: z.boolean().optional(),
    webrtc: z.boolean().optional(),
  })
  .catchall(z.union([z.string().max(256), finite, z.boolean()]))
  .refine((c) => Object.keys(c).length <= 32, 'at most 32 capability keys');
export type Capabilities = z.infer<typeof capabilitiesSchema>;

/** A job's training configuration (public: never holds the token). */
export const jobConfigSchema = z
  .strictObject({
    model: shortText,
    optimizer: shortText,
    /**
     * The job's settings, bounded here as the wire carries them. What each may hold is settings.ts's
     * (parseJobSettings): the server checks a job against it when the job is added, and a peer reads
     * its job through it; a bad or unknown setting is refused there, naming it, rather than failing
     * this message's parse with a malformed-protocol error.
     */
    hyperparameters: z.record(z.string().max(64), z.union([finite, z.string().max(256), z.boolean()])),
    batchPerPeer: z.number().int().min(1),
    minPeers: z.number().int().min(1),
    maxPeers: z.number().int().min(1).max(1024),
    /** Listed by GET /api/jobs to anyone; otherwise only to a request bearing the job's token. */
    public: z.boolean().optional(),
    /** Peers the job waits for before its first step (default minPeers); afterwards minPeers is enough. */
    startPeers: z.number().int().min(1).optional(),
    /** Members one remote address may hold in this job (else the server's limit, by default none). */
    maxPeersPerAddress: z.number().int().min(1).optional(),
  })
  .refine((c) => c.maxPeers >= c.minPeers, { message: 'maxPeers must be >= minPeers', path: ['maxPeers'] })
  .refine((c) => c.startPeers === undefined || (c.startPeers >= c.minPeers && c.startPeers <= c.maxPeers), {
    message: 'startPeers must be from minPeers to maxPeers',
    path: ['startPeers'],
  });
export type JobConfig = z.infer<typeof jobConfigSchema>;

/** A job's own STUN/TURN servers (else the server's); private like the token, handed out only in `welcome`. */
export const jobIceSchema = z.strictObject({
  stun: z.array(z.string().max(512)).max(8).optional(),
  turn: z.array(z.string().max(512)).max(8).optional(),
  transportPolicy: z.enum(['all', 'relay']).optional(),
});

/** How the server is told about a job: its id, its secret token, its config, optionally its ICE servers. */
export const jobSpecSchema = z.strictObject({
  id: idText,
  token: idText,
  config: jobConfigSchema,
  ice: jobIceSchema.optional(),
});
export type JobSpec = z.infer<typeof jobSpecSchema>;

export const progressFields = {
  step: z.number().int().min(0),
  epoch: z.number().int().min(0).optional(),
  loss: finite.optional(),
  samplesPerS: finite.min(0).optional(),
  stepsPerS: finite.min(0).optional(),
  testAccuracy: finite.min(0).max(1).optional(),
  /** The evaluation's mean loss (the transformer's validation loss, nats per character). */
  testLoss: finite.min(0).optional(),
  allreduceBytes: finite.min(0).optional(),
  /** Examples this peer took of the last step's global batch (its share). */
  share: z.number().int().min(0).optional(),
};
export const progressSchema = z.strictObject(progressFields);
export type Progress = z.infer<typeof progressSchema>;

/**
 * A peer's progress as the server shows it: what the peer said of itself, marked so. The server
 * cannot check a loss or an accuracy; it checks that steps grow and stay within the job, and that
 * a claimed speed fits the pace of the peer's own reports (`dropped`: the speeds it left out).
 * `at` is the server's Date.now() when the report arrived.
 */
export type ShownProgress = Progress & { at: number; selfReported: true; dropped?: ('samplesPerS' | 'stepsPerS')[] };

/**
 * What GET /api/jobs/:id answers (GET /api/jobs: an array of them): everything but
 * the token, and only to a request bearing the job's token (Authorization: Bearer),
 * or to anyone when the job's config says `public: true`.
 */
/** The leave reason of a peer that completed its training: the job is then finished, not waiting. */
export const FINISHED_LEAVE_REASON = 'done';

export interface PublicJobInfo {
  id: string;
  config: JobConfig;
  epoch: number;
  size: number;
  ready: boolean;
  started: boolean;
  /**
   * Set when a peer left saying it completed its training (FINISHED_LEAVE_REASON), until the
   * next join: when, and the last progress it reported (its final step, loss and accuracy).
   */
  finished?: { at: number; progress?: ShownProgress };
  /** Joiners still proving their links (staged admission), when there are any: they are in no membership yet. */
  candidates?: number;
  /** In rank order. */
  peers: {
    rank: number;
    peerId: string;
    runtime: 'browser' | 'deno' | 'node';
    name?: string;
    capabilities?: Capabilities;
    joinedAt: number;
    progress?: ShownProgress;
    voter: boolean;
  }[];
}

// ---- client → server ------------------------------------------------------

export const joinMsg = z.strictObject({
  type: z.literal('join'),
  protocol: z.number().int(),
  job: idText,
  token: idText,
  runtime: runtimeSchema,
  name: nameText.optional(),
  capabilities: capabilitiesSchema.optional(),
  /** The public key this peer signs its check values with (`ed25519:<base64>` or `p256:<base64>`): src/distributed/session/ring-keys.ts. */
  signingKey: z.string().max(200).optional(),
});
export const clientSignalMsg = z.strictObject({ type: z.literal('signal'), epoch, to: rank, data: signalData });
export const pongMsg = z.strictObject({ type: z.literal('pong'), seq: z.number().int().min(0) });
export const progressMsg = z.strictObject({ type: z.literal('progress'), ...progressFields });
export const leaveMsg = z.strictObject({ type: z.literal('leave'), reason: z.string().max(256).optional() });
export const reportMsg = z.strictObject({
  type: z.literal('report'),
  peerId: z.string().min(1).max(64),
  reason: z.string().max(256),
});
export const attestMsg = z.strictObject({ type: z.literal('attest'), epoch });
const probeId = z.number().int().min(1);
export const clientProbeSignalMsg = z.strictObject({
  type: z.literal('probe-signal'),
  probe: probeId,
  data: signalData,
});
export const probeOkMsg = z.strictObject({ type: z.literal('probe-ok'), probe: probeId });

/** Schemas by type; the server looks the type up first so it can tell unknown types from bad ones. */
export const clientMessageSchemas = {
  join: joinMsg,
  signal: clientSignalMsg,
  pong: pongMsg,
  progress: progressMsg,
  leave: leaveMsg,
  report: reportMsg,
  attest: attestMsg,
  'probe-signal': clientProbeSignalMsg,
  'probe-ok': probeOkMsg,
} as const;
export type ClientMessageType = keyof typeof clientMessageSchemas;
export type JoinMsg = z.infer<typeof joinMsg>;
export type ClientMessage =
  | JoinMsg
  | z.infer<typeof clientSignalMsg>
  | z.infer<typeof pongMsg>
  | z.infer<typeof progressMsg>
  | z.infer<typeof leaveMsg>
  | z.infer<typeof reportMsg>
  | z.infer<typeof attestMsg>
  | z.infer<typeof clientProbeSignalMsg>
  | z.infer<typeof probeOkMsg>;

// ---- server → client ------------------------------------------------------
// Non-strict: a client accepts (and ignores) fields a newer server adds.

export const peerInfoSchema = z.object({
  rank,
  peerId: z.string(),
  runtime: runtimeSchema,
  name: z.string().optional(),
  /** Whether the server counts this member's reports (it has proven it trains with the others: `attest`). */
  voter: z.boolean().optional(),
  /** The public key it joined with: its signed check values are checked against it. */
  signingKey: z.string().optional(),
});
export type PeerInfo = z.infer<typeof peerInfoSchema>;

export const membershipChangeSchema = z.object({
  kind: z.enum(['join', 'leave']),
  peerId: z.string(),
  name: z.string().optional(),
  reason: z.string().optional(),
});

/** One STUN or TURN server, as RTCPeerConnection's `iceServers` takes it. */
export const iceServerSchema = z.object({
  urls: z.union([z.string().min(1).max(512), z.array(z.string().min(1).max(512)).min(1).max(8)]),
  username: z.string().max(512).optional(),
  credential: z.string().max(512).optional(),
});
export type IceServer = z.infer<typeof iceServerSchema>;
export const ICE_TRANSPORT_POLICIES = ['all', 'relay'] as const;
export type IceTransportPolicy = (typeof ICE_TRANSPORT_POLICIES)[number];

export const welcomeMsg = z.object({
  type: z.literal('welcome'),
  protocol: z.number().int(),
  peerId: z.string(),
  job: z.object({ id: z.string(), config: jobConfigSchema }),
  heartbeatMs: z.number().int().positive(),
  missedHeartbeats: z.number().int().positive(),
  iceServers: z.array(iceServerSchema).max(16).optional(),
  iceTransportPolicy: z.enum(ICE_TRANSPORT_POLICIES).optional(),
});
export const membershipMsg = z.object({
  type: z.literal('membership'),
  epoch,
  peers: z.array(peerInfoSchema),
  ring: z.array(rank),
  you: rank,
  size: z.number().int().min(0),
  ready: z.boolean(),
  started: z.boolean(),
  change: membershipChangeSchema,
  /** This epoch's TCP link key (base64), to native members only. */
  linkKey: z.string().max(64).optional(),
});
export const peerLeftMsg = z.object({
  type: z.literal('peer-left'),
  epoch,
  peerId: z.string(),
  rank,
  name: z.string().optional(),
  reason: z.string(),
  detail: z.string().optional(),
});
export const serverSignalMsg = z.object({ type: z.literal('signal'), epoch, from: rank, data: signalData });
export const pingMsg = z.object({ type: z.literal('ping'), seq: z.number().int().min(0) });
export const errorMsg = z.object({
  type: z.literal('error'),
  code: z.string(),
  message: z.string(),
  fatal: z.boolean(),
});

export const candidateMsg = z.object({ type: z.literal('candidate'), deadlineMs: z.number().int().min(0) });
export const probeMsg = z.object({
  type: z.literal('probe'),
  probe: probeId,
  side: z.union([z.literal(0), z.literal(1)]),
  peer: z.object({ peerId: z.string(), runtime: runtimeSchema, name: z.string().optional() }),
  linkKey: z.string().max(64).optional(),
});
export const serverProbeSignalMsg = z.object({ type: z.literal('probe-signal'), probe: probeId, data: signalData });

export const serverMessageSchema = z.discriminatedUnion('type', [
  welcomeMsg,
  membershipMsg,
  peerLeftMsg,
  serverSignalMsg,
  pingMsg,
  errorMsg,
  candidateMsg,
  probeMsg,
  serverProbeSignalMsg,
]);
export type ServerMessage = z.infer<typeof serverMessageSchema>;
export type WelcomeMsg = z.infer<typeof welcomeMsg>;
export type MembershipMsg = z.infer<typeof membershipMsg>;
export type PeerLeftMsg = z.infer<typeof peerLeftMsg>;
export type ErrorMsg = z.infer<typeof errorMsg>;
export type ProbeMsg = z.infer<typeof probeMsg>;

/** A short, human-readable summary of a zod failure (first few issues). */
export function describeIssues(error: z.ZodError, limit = 3): string {
  return error.issues
    .slice(0, limit)
    .map((i) => `${i.path.length ? i.path.join('.') : '(message)'}: ${i.message}`)
    .join('; ');
}
