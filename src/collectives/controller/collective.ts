/**
 * How every collective runs: one name claimed at a time, an id, a cached agreement tried first
 * (the fast path) and negotiation otherwise, the body, and the begin and end events. A failure while
 * data moves aborts the communicator, since the other ranks may be waiting on this one. The state
 * of one collective while it runs is its Run (run.ts).
 */
import { ErrorCode, RingtrainError, isRingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import type { Communicator } from '../../comm/interface.ts';
import { cacheOf } from './cache.ts';
import { FALLBACK_STEP, isFastStep, negotiate, type Request } from './negotiate.ts';
import { dtypeOf, type CollectiveOptions, type Tensor } from '../codecs/types.ts';
import { Fallback, Run } from './run.ts';

export interface Begin {
  kind: string;
  request: Omit<Request, 'kind'>;
  count: number;
  bytes: number;
  varyingShape?: boolean;
  /** The caller named it: a second one of that name while it runs is an error (Horovod's duplicate-name check). */
  named?: boolean;
  /**
   * Whether a cached agreement (every rank's request) may go ahead without negotiating: only
   * where each rank's result needs data from every other rank over links that carry at least
   * one message (so a rank that falls back holds everyone up). Absent: always negotiated.
   */
  fast?: (requests: Request[]) => boolean;
  /**
   * The data is checked after the collective (a verified reduction's sums against the published
   * sketches), which names a link that changed it: on the fast path a fingerprint damaged on its
   * way then goes on instead of sending every rank back to negotiate.
   */
  checkedAfter?: boolean;
  /** Saves what the body changes in place; the returned function puts it back (a fast path that falls back). */
  snapshot?: () => () => void;
}

/** Names of the collectives running on each communicator (explicitly named ones only). */
const running = new WeakMap<Communicator, Set<string>>();

function claimName(comm: Communicator, begin: Begin): () => void {
  if (!begin.named) return () => {};
  let names = running.get(comm);
  if (!names) running.set(comm, (names = new Set()));
  const name = begin.request.name;
  if (names.has(name)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${begin.kind}: a collective named '${name}' is still running on rank ${comm.rank}; two concurrent collectives need different names (await the first, or rename one)`,
      { name, rank: comm.rank },
    );
  }
  names.add(name);
  return () => names.delete(name);
}

export async function runCollective<T>(
  comm: Communicator,
  opts: CollectiveOptions,
  begin: Begin,
  body: (run: Run, requests: Request[]) => Promise<T>,
): Promise<T> {
  if (comm.error) throw comm.error;
  // Before taking an id: a refused call must leave the ids of later collectives in step.
  const release = claimName(comm, begin);
  try {
    return await runClaimed(comm, opts, begin, body);
  } finally {
    release();
  }
}

async function runClaimed<T>(
  comm: Communicator,
  opts: CollectiveOptions,
  begin: Begin,
  body: (run: Run, requests: Request[]) => Promise<T>,
): Promise<T> {
  const run = new Run(comm, comm.nextId(), begin.request.name, opts);
  const ev = comm.events;
  if (ev.active) {
    ev.emit({
      type: 'collective-begin',
      t: now(),
      rank: comm.rank,
      size: comm.size,
      id: run.id,
      name: run.name,
      kind: begin.kind,
      op: begin.request.op,
      dtype: begin.request.dtype,
      count: begin.count,
      bytes: begin.bytes,
    });
  }
  try {
    const mine: Request = { kind: begin.kind, ...begin.request };
    const cache = cacheOf(comm);
    const hit = comm.size > 1 && begin.fast ? cache.lookup(comm.rank, mine) : null;
    let fellBack: Fallback | null = null;
    if (hit && begin.fast!(hit.requests)) {
      const restore = begin.snapshot?.();
      const outcome = await moving(run, () => goAhead(run, hit.requests, hit.fingerprint, body, begin.checkedAfter));
      if (outcome.done) {
        cache.touch(mine, hit);
        if (ev.active)
          ev.emit({ type: 'collective-end', t: now(), rank: comm.rank, id: run.id, name: run.name, ok: true });
        return outcome.result;
      }
      fellBack = outcome.fallback;
      restore?.();
    } else if (comm.size > 1 && begin.fast) {
      // Ranks that found it in their caches went ahead: bring them back.
      tellOthers(run);
    }
    let requests: Request[];
    try {
      requests = await run.phase('negotiate', () =>
        negotiate(comm, run.id, mine, { timeoutMs: run.timeoutMs, varyingShape: begin.varyingShape }),
      );
    } catch (e) {
      // Data moved on the fast path and someone never came: as before anything moved, every rank fails alike.
      if (fellBack && (e as RingtrainError).code === ErrorCode.Timeout) {
        comm.abort(e as RingtrainError);
        throw comm.error ?? e;
      }
      throw e;
    } finally {
      if (begin.fast && comm.size > 1) comm.forget?.(run.id, isFastStep);
    }
    cache.store(requests);
    const result = await moving(run, async () => {
      const r = await body(run, requests);
      await run.flush();
      return r;
    });
    if (ev.active) ev.emit({ type: 'collective-end', t: now(), rank: comm.rank, id: run.id, name: run.name, ok: true });
    return result;
  } catch (e) {
    if (ev.active)
      ev.emit({
        type: 'collective-end',
        t: now(),
        rank: comm.rank,
        id: run.id,
        name: run.name,
        ok: false,
        error: (e as Error).message,
      });
    throw e;
  }
}

/** Runs `f` while data moves: a failure then aborts the communicator, since other ranks may be waiting on us. */
async function moving<T>(run: Run, f: () => Promise<T>): Promise<T> {
  const comm = run.comm;
  try {
    return await f();
  } catch (e) {
    const err = isRingtrainError(e)
      ? e
      : new RingtrainError(
          ErrorCode.Transport,
          `collective #${run.id} '${run.name}' failed on rank ${comm.rank}: ${(e as Error).message}`,
          { rank: comm.rank },
          { cause: e },
        );
    comm.abort(err);
    throw comm.error ?? err;
  }
}

/** The body on a cached agreement; a Fallback (ours or another rank's) comes back as such, anything else throws. */
async function goAhead<T>(
  run: Run,
  requests: Request[],
  fingerprint: Uint8Array,
  body: (run: Run, requests: Request[]) => Promise<T>,
  checkedAfter?: boolean,
): Promise<{ done: true; result: T } | { done: false; fallback: Fallback }> {
  const comm = run.comm;
  run.goFast(fingerprint, checkedAfter);
  for (let r = 0; r < comm.size; r++) {
    if (r === comm.rank) continue;
    // Quiet when forgotten (the collective is over) or when the communicator fails (the body sees it too).
    comm.recv(r, { id: run.id, step: FALLBACK_STEP, chunk: 0 }).then(
      () => run.fallBack(new Fallback(`rank ${r} asked to negotiate`, false)),
      () => {},
    );
  }
  try {
    const result = await body(run, requests);
    await run.flush();
    comm.forget?.(run.id, isFastStep);
    return { done: true, result };
  } catch (e) {
    const fallback = run.fallen;
    if (!fallback) throw e;
    if (fallback.tell) tellOthers(run);
    run.goSlow();
    return { done: false, fallback };
  }
}

/** Tells every other rank to negotiate this collective (one that went ahead on its cache falls back). */
function tellOthers(run: Run): void {
  const comm = run.comm;
  const tag = { id: run.id, step: FALLBACK_STEP, chunk: 0 };
  for (let r = 0; r < comm.size; r++) if (r !== comm.rank) comm.send(r, tag, new Uint8Array(0)).catch(() => {}); // a lost peer aborts the communicator anyway
}

/** Checks shared by every collective's arguments. */
export function validate(
  comm: Communicator,
  data: unknown,
  opts: CollectiveOptions,
  what: string,
): asserts data is Tensor {
  if (!dtypeOf(data)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: the tensor must be a Float32Array, Int32Array, Int8Array or Uint16Array (float16 bits), got ${Object.prototype.toString.call(data)}`,
    );
  }
  if (opts.segmentBytes !== undefined && !(Number.isFinite(opts.segmentBytes) && opts.segmentBytes >= 2)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: segmentBytes must be a number >= 2, got ${opts.segmentBytes}`,
    );
  }
  if (opts.timeoutMs !== undefined && !(Number.isFinite(opts.timeoutMs) && opts.timeoutMs > 0)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${what}: timeoutMs must be a positive number, got ${opts.timeoutMs}`,
    );
  }
  const length = (data as Tensor).length;
  if (opts.shape) {
    const n = Array.isArray(opts.shape) ? opts.shape.reduce((a, b) => a * b, 1) : NaN;
    if (!Array.isArray(opts.shape) || !opts.shape.every((d) => Number.isInteger(d) && d >= 0) || n !== length) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${what}: shape ${JSON.stringify(opts.shape)} does not describe ${length} elements`,
      );
    }
  }
  if (comm.error) throw comm.error;
}
