/**
 * Negotiation, after Horovod's controller: every rank tells the coordinator
 * (rank 0) what it is about to do; the coordinator checks that all agree and
 * answers everyone with one verdict:
 *
 *   rank r -> rank 0   {id, NEGOTIATE_STEP}   the rank's Request (JSON)
 *   rank 0 -> rank r   {id, VERDICT_STEP}     {ok: true, requests} | {ok: false, code, message, detail}
 *
 * This is the slow path. A collective every rank has agreed on before (the
 * response cache, cache.ts) does not come here at all: run.ts sends its data
 * at once with the cached agreement's fingerprint on the first message to each
 * peer, and only a rank that misses, a fingerprint that differs or a peer that
 * stays silent sends everyone back here:
 *
 *   rank r -> every s  {id, FALLBACK_STEP}    "negotiate this one": any rank that went ahead on its cache comes back
 *
 * So a disagreement fails on every rank with the same error naming who sent
 * what; ranks that never show up are named by a Timeout (the stall inspector,
 * which also emits 'stall' events while it waits). The verdict goes to late
 * ranks too: when they finally arrive they find it waiting and fail at once.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { now } from '../../core/events.ts';
import type { Communicator } from '../../comm/interface.ts';
import type { RankGroups } from '../codecs/types.ts';

export interface Request {
  name: string;
  kind: string;
  dtype: string;
  shape: number[];
  op?: string;
  root?: number;
  compression?: string;
  prescale?: number;
  postscale?: number;
  algorithm?: string;
  /** Allreduce: ReduceOptions.groups, the ranks that share a host (hierarchical algorithm). */
  groups?: RankGroups;
  /** Per-rank facts that may differ between ranks (alltoall splits, for instance). */
  extra?: number[];
}

export const NEGOTIATE_STEP = 0xfffffff0;
export const VERDICT_STEP = 0xfffffff1;
export const FALLBACK_STEP = 0xfffffff2;
/** Set in the step of every data message sent on a cached agreement before anyone confirmed it (run.ts). */
export const FAST_STEP_BIT = 0x08000000;

/** The steps a collective forgets once it knows whether its cached agreement held: its speculative data and fallback notes. */
export function isFastStep(step: number): boolean {
  return step === FALLBACK_STEP || ((step & FAST_STEP_BIT) !== 0 && step < NEGOTIATE_STEP);
}

type Verdict =
  { ok: true; requests: Request[] } | { ok: false; code: string; message: string; detail: Record<string, unknown> };

const enc = new TextEncoder();
const dec = new TextDecoder();

export function describe(r: Request, withAlgorithm = false): string {
  if (r.kind === 'process-set') return `process-set '${r.name}' of ranks [${r.shape.join(', ')}]`;
  const parts = [`${r.kind} '${r.name}' ${r.dtype}[${r.shape.join('x')}]`];
  if (r.op) parts.push(`op=${r.op}`);
  if (r.root !== undefined) parts.push(`root=${r.root}`);
  if (r.compression && r.compression !== 'none') parts.push(`compression=${r.compression}`);
  if (r.prescale !== undefined && r.prescale !== 1) parts.push(`prescale=${r.prescale}`);
  if (r.postscale !== undefined && r.postscale !== 1) parts.push(`postscale=${r.postscale}`);
  if (withAlgorithm && r.algorithm) parts.push(`algorithm=${r.algorithm}`);
  if (r.groups !== undefined) parts.push(`groups=${JSON.stringify(r.groups)}`);
  return parts.join(' ');
}

/** The mismatch error, or null when every request agrees on what must agree. */
function check(id: number, requests: Request[], varyingShape: boolean): Verdict {
  // Where sizes may differ per rank (allgather, alltoall) only the first dimension may: the rest must agree.
  const shapeKey = (r: Request) => (varyingShape ? [r.shape.length, ...r.shape.slice(1)] : r.shape);
  const signature = (r: Request) =>
    JSON.stringify([
      r.name,
      r.kind,
      r.dtype,
      r.op,
      r.root,
      r.compression,
      r.prescale ?? 1,
      r.postscale ?? 1,
      r.algorithm,
      shapeKey(r),
      r.groups,
    ]);
  const groups = new Map<string, number[]>();
  requests.forEach((r, rank) => {
    const s = signature(r);
    groups.set(s, [...(groups.get(s) ?? []), rank]);
  });
  if (groups.size === 1) return { ok: true, requests };
  // The algorithm follows from the size and options; name it only where it is what differs.
  const algorithms = new Set(requests.map((r) => r.algorithm)).size > 1;
  const said = [...groups.values()].map(
    (ranks) => `rank${ranks.length > 1 ? 's' : ''} ${ranks.join(',')} sent ${describe(requests[ranks[0]], algorithms)}`,
  );
  return {
    ok: false,
    code: ErrorCode.Mismatch,
    message: `collective #${id}: ranks disagree: ${said.join('; ')}. Every rank must call the same collectives in the same order with the same name, op, dtype, scale factors and shape${varyingShape ? ' (all dimensions but the first)' : ''}`,
    detail: { id, requests: requests.map((r, rank) => ({ rank, ...r })) },
  };
}

export interface NegotiateOptions {
  timeoutMs: number;
  /** Shapes may differ between ranks (allgather, alltoall). */
  varyingShape?: boolean;
}

/** Agrees on `mine` with every rank through the coordinator; resolves with every rank's request, in rank order. */
export async function negotiate(
  comm: Communicator,
  id: number,
  mine: Request,
  o: NegotiateOptions,
): Promise<Request[]> {
  if (comm.size === 1) return [mine];
  return negotiateWithCoordinator(comm, id, mine, o);
}

async function negotiateWithCoordinator(
  comm: Communicator,
  id: number,
  mine: Request,
  o: NegotiateOptions,
): Promise<Request[]> {
  const ask = { id, step: NEGOTIATE_STEP, chunk: 0 };
  const answer = { id, step: VERDICT_STEP, chunk: 0 };
  let verdict: Verdict;
  if (comm.rank === 0) {
    try {
      verdict = await coordinate(comm, id, mine, o);
    } catch (e) {
      // A rank left while we gathered: the others wait on our verdict, so they get this failure too.
      const err = e as RingtrainError;
      verdict = { ok: false, code: err.code ?? ErrorCode.Transport, message: err.message, detail: err.detail ?? {} };
    }
    const bytes = enc.encode(JSON.stringify(verdict));
    // Ranks that are gone cannot be told; the rest must be.
    await Promise.allSettled(Array.from({ length: comm.size - 1 }, (_, i) => comm.send(i + 1, answer, bytes)));
  } else {
    await comm.send(0, ask, enc.encode(JSON.stringify(mine)));
    // The coordinator may itself wait up to timeoutMs for the slowest rank; give it that and as much again.
    // Within timeoutMs the coordinator speaks for the stall (it knows who is missing) and then answers;
    // well after that (half as long again, for its verdict to travel), the coordinator itself is late.
    const asked = now();
    const coordinatorLate = () => (now() - asked > 1.5 * o.timeoutMs ? [0] : []);
    const raw = await stallWatch(
      comm,
      id,
      mine.name,
      coordinatorLate,
      comm.recv(0, answer, 2 * o.timeoutMs).catch((e) => {
        if ((e as RingtrainError).code === ErrorCode.Timeout) {
          throw new RingtrainError(
            ErrorCode.Timeout,
            `collective #${id} '${mine.name}': rank 0 (the coordinator) never answered within ${2 * o.timeoutMs} ms; ranks that never answered: 0`,
            { id, waitingFor: [0], rank: comm.rank },
          );
        }
        throw e;
      }),
      o.timeoutMs,
    );
    verdict = JSON.parse(dec.decode(raw)) as Verdict;
  }
  if (!verdict.ok)
    throw new RingtrainError(verdict.code as ErrorCode, verdict.message, { ...verdict.detail, rank: comm.rank });
  return verdict.requests;
}

async function coordinate(comm: Communicator, id: number, mine: Request, o: NegotiateOptions): Promise<Verdict> {
  const requests: (Request | undefined)[] = [mine];
  const missing = () => requests.map((r, rank) => (r ? -1 : rank)).filter((r) => r >= 0);
  for (let r = 1; r < comm.size; r++) requests.push(undefined);
  const waits = requests.map((_, r) =>
    r === 0
      ? Promise.resolve()
      : comm
          .recv(r, { id, step: NEGOTIATE_STEP, chunk: 0 }, o.timeoutMs)
          .then((b) => void (requests[r] = JSON.parse(dec.decode(b)) as Request)),
  );
  const settled = await stallWatch(comm, id, mine.name, missing, Promise.allSettled(waits), o.timeoutMs);
  const other = settled.find((s) => s.status === 'rejected' && (s.reason as RingtrainError).code !== ErrorCode.Timeout);
  if (other) throw (other as PromiseRejectedResult).reason;
  const silent = missing();
  if (silent.length > 0) {
    return {
      ok: false,
      code: ErrorCode.Timeout,
      message: `collective #${id} '${mine.name}': rank(s) ${silent.join(', ')} never answered within ${o.timeoutMs} ms (stalled, crashed, or calling a different sequence of collectives)`,
      detail: { id, waitingFor: silent, timeoutMs: o.timeoutMs },
    };
  }
  return check(id, requests as Request[], o.varyingShape ?? false);
}

/** Awaits `p`, emitting 'stall' events naming whom we still wait for, every quarter of the timeout. */
async function stallWatch<T>(
  comm: Communicator,
  id: number,
  name: string,
  waitingFor: () => number[],
  p: Promise<T>,
  timeoutMs: number,
): Promise<T> {
  const start = now();
  const every = Math.max(50, Math.min(5000, timeoutMs / 4));
  const timer = setInterval(() => {
    const who = waitingFor();
    if (who.length > 0 && comm.events.active)
      comm.events.emit({
        type: 'stall',
        t: now(),
        rank: comm.rank,
        id,
        name,
        waitingFor: who,
        waitedMs: now() - start,
      });
  }, every);
  try {
    return await p;
  } finally {
    clearInterval(timer);
  }
}
