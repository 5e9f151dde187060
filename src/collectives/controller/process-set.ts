/**
 * Process sets, as in Horovod: collectives over a subset of the ranks.
 * A set is created collectively: every rank of the parent communicator calls
 * `addProcessSet(comm, ranks)` with the same list (negotiated like any
 * collective, so a rank with a different list fails them all with Mismatch).
 * Members get a Communicator of their own, ranked by position in the sorted
 * list, on which every collective runs unchanged; its coordinator is the
 * set's first member. Non-members get one too, which refuses every
 * collective, saying why.
 *
 * A set's messages travel on the parent's links. Their collective ids live
 * in a range of their own (the top bit set, then the set's number, then the
 * set's own collective counter), so they never meet the parent's or another
 * set's messages. An abort inside a set aborts the parent: ranks that were
 * left mid-collective cannot be trusted with another one.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { EventBus } from '../../core/events.ts';
import { lendOrSend, type Communicator, type Tag } from '../../comm/interface.ts';
import { runCollective } from './collective.ts';

/** Set ids start here; parent ids stay below (2^31 collectives). */
const SET_ID_BASE = 0x80000000;
/** Collective ids per set before they wrap (old ones are long done by then). */
const IDS_PER_SET = 1 << 20;
/** Sets per communicator: what fits between SET_ID_BASE and 2^32. */
export const MAX_PROCESS_SETS = 2048;

const setsCreated = new WeakMap<Communicator, number>();

export class ProcessSet implements Communicator {
  readonly rank: number;
  readonly size: number;
  private counter = 0;
  private closed: RingtrainError | null = null;
  private readonly refusal: RingtrainError | null;

  constructor(
    readonly parent: Communicator,
    readonly ranks: readonly number[],
    readonly index: number,
    readonly name: string,
  ) {
    this.rank = ranks.indexOf(parent.rank);
    this.size = ranks.length;
    this.refusal =
      this.rank < 0
        ? new RingtrainError(
            ErrorCode.InvalidArgument,
            `rank ${parent.rank} is not in process set '${name}' (ranks ${ranks.join(', ')}); only its members may call its collectives`,
            { rank: parent.rank, ranks: [...ranks] },
          )
        : null;
  }

  /** Whether this rank belongs to the set. */
  get includes(): boolean {
    return this.rank >= 0;
  }

  get events(): EventBus {
    return this.parent.events;
  }

  get error(): RingtrainError | null {
    return this.refusal ?? this.parent.error ?? this.closed;
  }

  get stats(): { bytesSent: number; bytesReceived: number } {
    return this.parent.stats;
  }

  nextId(): number {
    return this.counter++;
  }

  private outer(tag: Tag): Tag {
    return { id: SET_ID_BASE + this.index * IDS_PER_SET + (tag.id % IDS_PER_SET), step: tag.step, chunk: tag.chunk };
  }

  private peer(p: number): number {
    const r = this.ranks[p];
    if (r === undefined || p === this.rank)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `process set '${this.name}' has no rank ${p} to talk to (size ${this.size}, this is rank ${this.rank})`,
      );
    return r;
  }

  send(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    const e = this.error;
    if (e) return Promise.reject(e);
    return this.parent.send(this.peer(peer), this.outer(tag), payload);
  }

  lend(peer: number, tag: Tag, payload: Uint8Array): Promise<void> {
    const e = this.error;
    if (e) return Promise.reject(e);
    return lendOrSend(this.parent, this.peer(peer), this.outer(tag), payload);
  }

  recv(peer: number, tag: Tag, timeoutMs?: number): Promise<Uint8Array> {
    const e = this.error;
    if (e) return Promise.reject(e);
    return this.parent.recv(this.peer(peer), this.outer(tag), timeoutMs);
  }

  release(peer: number, payload: Uint8Array): void {
    this.parent.release?.(this.peer(peer), payload);
  }

  expect(peer: number, bytes: number): () => void {
    return this.parent.expect?.(this.peer(peer), bytes) ?? (() => {});
  }

  forget(id: number, step: (step: number) => boolean): void {
    this.parent.forget?.(this.outer({ id, step: 0, chunk: 0 }).id, step);
  }

  abort(err: RingtrainError): void {
    this.parent.abort(err);
  }

  /** Stops this set (its later collectives fail at once); the parent goes on. */
  close(): Promise<void> {
    this.closed ??= new RingtrainError(ErrorCode.Aborted, `process set '${this.name}' was closed`, {
      ranks: [...this.ranks],
    });
    return Promise.resolve();
  }
}

/**
 * Creates a process set of `ranks` (ranks of `comm`; any order, no repeats).
 * Every rank of `comm` must call it, in the same order relative to its other
 * collectives, with the same ranks.
 */
export async function addProcessSet(
  comm: Communicator,
  ranks: number[],
  opts: { name?: string; timeoutMs?: number } = {},
): Promise<ProcessSet> {
  if (comm.error) throw comm.error;
  const sorted = [...ranks].sort((a, b) => a - b);
  if (
    !Array.isArray(ranks) ||
    sorted.length === 0 ||
    !sorted.every((r, i) => Number.isInteger(r) && r >= 0 && r < comm.size && (i === 0 || r !== sorted[i - 1]))
  ) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `addProcessSet: ranks [${String(ranks)}] must be distinct ranks of this ring (0..${comm.size - 1}), at least one`,
    );
  }
  const index = setsCreated.get(comm) ?? 0;
  if (index >= MAX_PROCESS_SETS)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `addProcessSet: this communicator already made ${MAX_PROCESS_SETS} process sets; make a new ring for more`,
    );
  const name = opts.name ?? `process-set-${index}`;
  // The ranks travel as the request's shape, so negotiation compares them like any shape.
  const request = { name, dtype: 'none', shape: sorted };
  await runCollective(comm, opts, { kind: 'process-set', request, count: 0, bytes: 0 }, async () => {});
  setsCreated.set(comm, index + 1);
  return new ProcessSet(comm, sorted, index, name);
}
