/**
 * Agreement on state (issue 37, item 3): every K steps and at the end of
 * training, the ranks of a ring compare a hash of their weights and optimizer
 * state. The verified allreduce checks sums; a rank whose state drifts by any
 * other path (a bad resume, a GPU that computes differently, memory
 * corruption, a re-form's state transfer gone wrong) would otherwise train on
 * unseen, its gradients averaged in.
 *
 * Each rank reads its state back, hashes it (SHA-256: src/core/sha256.ts) and the ring
 * allgathers the 32-byte digests. Every rank judges the same gathered digests,
 * so every rank reaches the same verdict:
 *  - all alike: nothing to do;
 *  - a majority (more than half the ranks) holds one digest: the others are a
 *    minority, named (event `state-differs`) and resynced by broadcast from
 *    the lowest rank of the majority. A rank that differs again at the next
 *    check is reported for ejection, as the step checks report (event
 *    `peer-misbehaved`, ERR_PEER_MISBEHAVED): its drift is not a one-off;
 *  - no majority (2 ranks that differ, or 3 that all do): nobody can be told
 *    right, so the run stops with ERR_STATE_MISMATCH rather than train on.
 *
 * The check at a K-th step rides: the state is read and hashed after step s's
 * update (`prepare`), the digests' gather begins beside step s+1's gradient
 * allreduce (`stateDigestRide`, a check that only starts it, like the
 * membership agreement), and its verdict is acted on between steps s+1 and
 * s+2 (`judgeRide`): the minority is resynced from the majority's state then,
 * which the broadcast sends as it is then, so the resync stays exact. A gather
 * begun on a ring that re-formed since is dropped: the re-form gave every rank
 * the root's state. At the end of training the check runs on its own (`check`).
 *
 * The cost is the read-back (every weight and every optimizer moment, the
 * same bytes a checkpoint reads) and the hash; the collective is 32 bytes per
 * rank and waits for no round of its own. The state is read and hashed a slice at a time (DIGEST_SLICE_FLOATS),
 * so a worker never holds a whole part of it on the CPU for the check.
 * Figures: docs/ROBUSTNESS.md, "Agreement on state".
 *
 * A digest says nothing against a liar: a rank can publish the majority's
 * digest whatever it holds. It finds state that drifted, not state forged.
 */
import type { Communicator } from '../../comm/interface.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import type { GradientCheck } from '../reduce/gradient-check.ts';
import { signedAllgather, startSignedAllgather } from '../session/signed-gather.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { sha256, sha256Stream } from '../../core/sha256.ts';
import { now } from '../../core/events.ts';
import type { Model } from '../../engine/model.ts';
import type { Optimizer, StatePart } from '../../engine/optimizer.ts';
import { broadcastOptimizerState, broadcastParameters } from '../api/broadcast-state.ts';

/** Steps between checks when a job does not say (`stateCheckEvery`): a read-back of the state every 100 steps costs a few percent at most of one step's time (docs/ROBUSTNESS.md). */
export const DEFAULT_STATE_CHECK_EVERY = 100;
/** Bytes of one rank's digest (SHA-256). */
export const STATE_DIGEST_BYTES = 32;

/** What the gathered digests say (the same on every rank). */
export type StateVerdict =
  | { kind: 'agreed'; hash: string }
  /** `differing`: the minority's ranks; `source`: the majority rank they are resynced from. */
  | { kind: 'minority'; hash: string; differing: number[]; source: number }
  /** `groups`: the ranks holding each digest, largest first. */
  | { kind: 'no-majority'; groups: number[][] };

/**
 * The verdict over every rank's digest (hex, by rank): a digest held by more than half the ranks
 * is the ring's; the ranks that hold another are the minority. With no such digest there is no
 * telling which ranks are right.
 */
export function judgeStateHashes(hashes: readonly string[]): StateVerdict {
  const byHash = new Map<string, number[]>();
  hashes.forEach((h, rank) => byHash.set(h, [...(byHash.get(h) ?? []), rank]));
  const groups = [...byHash.values()].sort((a, b) => b.length - a.length || a[0] - b[0]);
  const [largest] = groups;
  if (groups.length === 1) return { kind: 'agreed', hash: hashes[0] };
  if (largest.length * 2 <= hashes.length) return { kind: 'no-majority', groups };
  const differing = groups
    .slice(1)
    .flat()
    .sort((a, b) => a - b);
  return { kind: 'minority', hash: hashes[largest[0]], differing, source: largest[0] };
}

/**
 * Floats the digest reads and hashes at a time (64 MiB): a worker holds one slice of its state
 * on the CPU, never a whole part (GPT-2 124M's weights and each AdamW moment are 498 MB).
 */
export const DIGEST_SLICE_FLOATS = 16 << 20;

/**
 * One digest of the weights and the optimizer state: each part's name and length, then the
 * SHA-256 of its values, all hashed together in a fixed order (the weights, then the
 * optimizer's parts by name).
 */
export async function stateDigest(
  params: Float32Array,
  optimizerState: Record<string, Float32Array>,
): Promise<Uint8Array> {
  return digestOf(arrayPart('params', params), () => arrayParts(optimizerState));
}

/**
 * stateDigest of what `model` and `optimizer` hold, read back and hashed a slice of
 * `sliceFloats` at a time where they can be read so (GraphModel, the flat optimizers), else a
 * part at a time; either way the same digest.
 */
export async function readStateDigest(
  model: Pick<Model, 'readParams' | 'readParamsInto' | 'flatLength'>,
  optimizer: Pick<Optimizer, 'exportState' | 'stateParts'>,
  sliceFloats = DIGEST_SLICE_FLOATS,
): Promise<Uint8Array> {
  const params: StatePart = model.readParamsInto
    ? { name: 'params', length: model.flatLength, read: (offset, into) => model.readParamsInto!(offset, into) }
    : arrayPart('params', await model.readParams());
  // Without parts, exportState's arrays: read after the weights' digest, so the weights are let go first.
  const optimizerParts = optimizer.stateParts
    ? () => optimizer.stateParts!()
    : async () => arrayParts(await optimizer.exportState());
  return digestOf(params, optimizerParts, sliceFloats);
}

function arrayPart(name: string, values: Float32Array): StatePart {
  return { name, length: values.length, read: async (offset, into) => values.subarray(offset, offset + into.length) };
}

function arrayParts(state: Record<string, Float32Array>): StatePart[] {
  return Object.keys(state).map((k) => arrayPart(k, state[k]));
}

/**
 * The weights' digest, then the optimizer's parts' (`optim/<name>`, by name), whose parts are
 * asked for only once the weights are hashed; then the digest of them all.
 */
async function digestOf(
  params: StatePart,
  optimizerParts: () => StatePart[] | Promise<StatePart[]>,
  sliceFloats = DIGEST_SLICE_FLOATS,
): Promise<Uint8Array> {
  const room = new Float32Array(Math.max(1, Math.min(sliceFloats, params.length)));
  const pieces = await partDigest(params, 'params', room);
  const optimizer = [...(await optimizerParts())].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const part of optimizer) pieces.push(...(await partDigest(part, `optim/${part.name}`, room)));
  const all = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    all.set(p, at);
    at += p.length;
  }
  return sha256(all);
}

/** A part's name and length, then the SHA-256 of its values: one slice read into `room` at a time. */
async function partDigest(part: StatePart, name: string, room: Float32Array): Promise<Uint8Array[]> {
  const header = new TextEncoder().encode(`${name}:${part.length}\n`);
  if (part.length <= room.length) return [header, await sha256(await part.read(0, room.subarray(0, part.length)))];
  const hash = sha256Stream();
  for (let at = 0; at < part.length; at += room.length)
    hash.update(await part.read(at, room.subarray(0, Math.min(room.length, part.length - at))));
  return [header, hash.digest()];
}

export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** What the check reads and resyncs: this rank's model and the optimizer whose state checkpoints carry. */
export interface StateAgreementParts {
  model: Model;
  optimizer: Optimizer;
  timeoutMs?: number;
  /** Told of a rank that differs again after it was resynced (a session reports it to the server). */
  misbehaviour?: MisbehaviourSink;
}

/** A gather of every rank's digest, as it ends: the digests in rank order, or why it failed. */
type GatherAnswer = { all: Int32Array } | { error: unknown };

/**
 * The agreement whose digest waits to ride beside a step's gradient allreduce, by the ring it was
 * read on: the ride check is handed only the communicator, and a re-formed ring finds none.
 */
const waitingOn = new WeakMap<Communicator, StateAgreement>();

/**
 * The state digests' gather as a check beside the gradient allreduce: where a rank's state was read
 * at the step before (`prepare`), `before` begins its gather and resolves, so the allreduce begins
 * beside it; the answer is read between steps (`judgeRide`). It reads no gradient.
 */
export const stateDigestRide: GradientCheck = {
  readsOnly: true,
  before: (comm) => waitingOn.get(comm)?.beginRide(comm),
  digest: () => ({ add() {}, finish: (comm) => waitingOn.get(comm)?.beginRide(comm) }),
};

export class StateAgreement {
  /** The ranks that differed at the last check, on the ring they differed on (a re-formed ring numbers afresh). */
  private differed: { comm: Communicator; ranks: number[] } | null = null;
  /** The last digest the ring agreed on (hex), and the step whose state it is. */
  agreed: { hash: string; step: number } | null = null;
  /** This rank's digest of its state at `step`, read on `comm`, until a step's allreduce takes its gather along. */
  private waiting: { comm: Communicator; step: number; digest: Int32Array } | null = null;
  /** The digests' gather begun beside a step's allreduce, to be judged between steps. */
  private riding: { comm: Communicator; step: number; answer: Promise<GatherAnswer> } | null = null;

  constructor(private readonly parts: StateAgreementParts) {}

  /** This rank's own digest of its state now (hex), agreed or not. */
  async localHash(): Promise<string> {
    return hex(await this.digest());
  }

  private async digest(): Promise<Uint8Array> {
    const { model, optimizer } = this.parts;
    return readStateDigest(model, optimizer);
  }

  private async digestWords(): Promise<Int32Array> {
    return new Int32Array(new Uint8Array(await this.digest()).buffer);
  }

  /**
   * The check of the state at `step`, begun: reads and hashes it now, and the next step's
   * gradient allreduce on `comm` takes the digests' gather along (stateDigestRide). One that no
   * step took along (a pass that reduced nothing) waits for the next that does, or for the next
   * K-th step's, which replaces it.
   */
  async prepare(comm: Communicator, step: number): Promise<void> {
    this.waiting = { comm, step, digest: await this.digestWords() };
    waitingOn.set(comm, this);
  }

  /** Begins the gather of the waiting digest; resolves once it has begun (its failure is read with its answer). */
  async beginRide(comm: Communicator): Promise<void> {
    const waiting = this.waiting;
    waitingOn.delete(comm);
    if (waiting?.comm !== comm) return;
    this.waiting = null;
    const begun = startSignedAllgather(comm, waiting.digest, this.gatherOptions(waiting.step));
    const answer = begun
      .then((b) => b.gathered)
      .then(
        (all): GatherAnswer => ({ all }),
        (error: unknown): GatherAnswer => ({ error }),
      );
    this.riding = { comm, step: waiting.step, answer };
    await begun.catch(() => {});
  }

  /**
   * Between steps: acts on the gather that rode beside this step's allreduce (as `check` does),
   * and resolves to the ring's digest; undefined where none rode on `comm` (none begun, or begun on
   * a ring that re-formed since: every rank holds the root's state now, and a digest read before
   * the re-form waiting to ride is dropped too).
   */
  async judgeRide(comm: Communicator): Promise<string | undefined> {
    const riding = this.riding;
    this.riding = null;
    if (this.waiting && this.waiting.comm !== comm) this.waiting = null;
    if (riding?.comm !== comm) return undefined;
    const answer = await riding.answer;
    if ('error' in answer) throw answer.error;
    return this.judge(comm, riding.step, answer.all);
  }

  /**
   * The check at `step`, on its own (the end of training): gathers every rank's digest and acts on
   * the verdict (module comment). Resolves to the digest the ring holds after it (hex); throws
   * ERR_PEER_MISBEHAVED naming a rank that differed at the last check too, or ERR_STATE_MISMATCH
   * when no majority holds one digest.
   */
  async check(comm: Communicator, step: number): Promise<string> {
    const waiting = this.waiting;
    this.waiting = null;
    this.riding = null;
    // A digest read at this step on this ring is of the state as it is: not read twice.
    const mine = waiting?.comm === comm && waiting.step === step ? waiting.digest : await this.digestWords();
    return this.judge(comm, step, await signedAllgather(comm, mine, this.gatherOptions(step)));
  }

  /** Signed like the step checks (signed-gather.ts): a relayer cannot make an honest rank's digest read as a minority. */
  private gatherOptions(step: number) {
    return { name: 'state-hash', step, timeoutMs: this.parts.timeoutMs, misbehaviour: this.parts.misbehaviour };
  }

  /** The verdict over the gathered digests of the state at `step`, acted on alike on every rank. */
  private async judge(comm: Communicator, step: number, all: Int32Array): Promise<string> {
    const bytes = new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
    const hashes = Array.from({ length: comm.size }, (_, r) =>
      hex(bytes.subarray(r * STATE_DIGEST_BYTES, (r + 1) * STATE_DIGEST_BYTES)),
    );
    const verdict = judgeStateHashes(hashes);
    const before = this.differed?.comm === comm ? this.differed.ranks : [];
    this.differed = null;
    if (verdict.kind === 'no-majority') throw noMajority(comm, step, hashes, verdict.groups);
    if (verdict.kind === 'minority') {
      const again = verdict.differing.filter((r) => before.includes(r));
      if (again.length > 0) throw differsAgain(comm, step, again, hashes, verdict.hash, this.parts.misbehaviour);
      this.name(comm, step, verdict, hashes);
      // The majority's state as it is now: after a ride, a step past the one whose digests were judged.
      await broadcastParameters(comm, this.parts.model, { root: verdict.source, timeoutMs: this.parts.timeoutMs });
      await broadcastOptimizerState(comm, this.parts.optimizer, {
        root: verdict.source,
        timeoutMs: this.parts.timeoutMs,
      });
      this.differed = { comm, ranks: verdict.differing };
    }
    this.agreed = { hash: verdict.hash, step };
    return verdict.hash;
  }

  /** The minority, told on every rank alike (timeline, the worker's stderr and --events). */
  private name(
    comm: Communicator,
    step: number,
    v: Extract<StateVerdict, { kind: 'minority' }>,
    hashes: string[],
  ): void {
    if (!comm.events.active) return;
    for (const peer of v.differing)
      comm.events.emit({
        type: 'state-differs',
        t: now(),
        rank: comm.rank,
        peer,
        step,
        hash: hashes[peer],
        majorityHash: v.hash,
        resyncFrom: v.source,
      });
  }
}

/** Where a rank's digest is shown in a message: enough hex to tell digests apart. */
function short(hash: string): string {
  return hash.slice(0, 12);
}

function differsAgain(
  comm: Communicator,
  step: number,
  ranks: number[],
  hashes: string[],
  majority: string,
  misbehaviour: MisbehaviourSink | undefined,
): RingtrainError {
  const who = ranks.map((r) => `rank ${r} (${short(hashes[r])}…)`).join(', ');
  const reason = `step ${step}: its weights and optimizer state differ from the majority's (${short(majority)}…) again, at the check after it was resynced from them`;
  for (const peer of ranks) {
    misbehaviour?.peerMisbehaved({ rank: comm.rank, peer, reason });
    if (comm.events.active) comm.events.emit({ type: 'peer-misbehaved', t: now(), rank: comm.rank, peer, reason });
  }
  return new RingtrainError(
    ErrorCode.PeerMisbehaved,
    `state check at step ${step}: ${who} again holds other weights or optimizer state than the majority (${short(majority)}…), after it was resynced at the last check. Elastic jobs eject it and go on; otherwise resume from the recovery checkpoint without it`,
    { peer: ranks[0], culprits: ranks, step, hashes },
  );
}

function noMajority(comm: Communicator, step: number, hashes: string[], groups: number[][]): RingtrainError {
  const held = groups.map((g) => `${g.map((r) => `rank ${r}`).join(', ')}: ${short(hashes[g[0]])}…`).join('; ');
  return new RingtrainError(
    ErrorCode.StateMismatch,
    `state check at step ${step}: the ${comm.size} ranks hold different weights or optimizer state (${held}) and no majority holds one, so nobody can be told right and nobody is named; training stops here. Resume every rank from one checkpoint (--resume), and check the ranks' GPUs and runtimes alike`,
    { step, hashes, groups },
  );
}
