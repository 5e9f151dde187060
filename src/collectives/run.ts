import { ErrorCode, RingtrainError, isRingtrainError } from '../core/errors.ts';
import { now, type Phase } from '../core/events.ts';
import type { Communicator, Tag } from '../comm/interface.ts';
import { negotiate, type Request } from './negotiate.ts';
import type { Range } from './partition.ts';
import { DEFAULT_SEGMENT_BYTES, DEFAULT_TIMEOUT_MS, dtypeOf, type CollectiveOptions, type Tensor } from './types.ts';
import type { Codec } from './wire.ts';

/**
 * One collective in flight on one rank: its id, its options, the events it
 * emits and the sends it has queued. Every collective function goes through
 * `runCollective`, which negotiates first and makes sure a failure while data
 * moves aborts the communicator (so no other rank is left waiting).
 */
export class Run {
  readonly timeoutMs: number;
  readonly segmentBytes: number;
  private sends: Promise<void>[] = [];

  constructor(readonly comm: Communicator, readonly id: number, readonly name: string, opts: CollectiveOptions) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.segmentBytes = opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
  }

  /** Elements per segment for a codec, never fewer than one. */
  segmentElements(codec: Codec): number {
    return Math.max(1, Math.floor((this.segmentBytes - codec.headerBytes) / codec.bytesPerElement));
  }

  tag(phase: number, step: number, chunk: number): Tag {
    return { id: this.id, step: (phase << 16) | step, chunk };
  }

  /** Queues a send without waiting for it; `flush()` waits for them all. */
  send(peer: number, tag: Tag, payload: Uint8Array): void {
    const p = this.comm.send(peer, tag, payload);
    p.catch(() => {}); // observed in flush(); a failure also aborts the communicator
    this.sends.push(p);
  }

  recv(peer: number, tag: Tag): Promise<Uint8Array> {
    return this.comm.recv(peer, tag, this.timeoutMs);
  }

  async flush(): Promise<void> {
    const all = this.sends;
    this.sends = [];
    await Promise.all(all);
  }

  async phase<T>(phase: Phase, body: () => Promise<T>): Promise<T> {
    const ev = this.comm.events;
    if (ev.active) ev.emit({ type: 'phase-begin', t: now(), rank: this.comm.rank, id: this.id, phase });
    try {
      return await body();
    } finally {
      if (ev.active) ev.emit({ type: 'phase-end', t: now(), rank: this.comm.rank, id: this.id, phase });
    }
  }

  /** chunk-send / chunk-recv events; values only when the bus asks for them (teaching mode). */
  chunkEvent(kind: 'chunk-send' | 'chunk-recv', phase: Phase, step: number, from: number, to: number, chunk: number, seg: Range, bytes: number, values?: Tensor, result?: Tensor): void {
    const ev = this.comm.events;
    if (!ev.active) return;
    const base = { t: now(), rank: this.comm.rank, id: this.id, phase, step, from, to, chunk, offset: seg.offset, count: seg.count, bytes };
    const teach = ev.withValues;
    if (kind === 'chunk-send') ev.emit({ type: kind, ...base, values: teach && values ? Array.from(values) : undefined });
    else ev.emit({ type: kind, ...base, values: teach && values ? Array.from(values) : undefined, result: teach && result ? Array.from(result) : undefined });
  }
}

export interface Begin {
  kind: string;
  request: Omit<Request, 'kind'>;
  count: number;
  bytes: number;
  varyingShape?: boolean;
  /** The caller named it: a second one of that name while it runs is an error (Horovod's duplicate-name check). */
  named?: boolean;
}

/** Names of the collectives running on each communicator (explicitly named ones only). */
const running = new WeakMap<Communicator, Set<string>>();

function claimName(comm: Communicator, begin: Begin): () => void {
  if (!begin.named) return () => {};
  let names = running.get(comm);
  if (!names) running.set(comm, (names = new Set()));
  const name = begin.request.name;
  if (names.has(name)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${begin.kind}: a collective named '${name}' is still running on rank ${comm.rank}; two concurrent collectives need different names (await the first, or rename one)`, { name, rank: comm.rank });
  }
  names.add(name);
  return () => names.delete(name);
}

export async function runCollective<T>(comm: Communicator, opts: CollectiveOptions, begin: Begin, body: (run: Run, requests: Request[]) => Promise<T>): Promise<T> {
  if (comm.error) throw comm.error;
  // Before taking an id: a refused call must leave the ids of later collectives in step.
  const release = claimName(comm, begin);
  try {
    return await runClaimed(comm, opts, begin, body);
  } finally {
    release();
  }
}

async function runClaimed<T>(comm: Communicator, opts: CollectiveOptions, begin: Begin, body: (run: Run, requests: Request[]) => Promise<T>): Promise<T> {
  const run = new Run(comm, comm.nextId(), begin.request.name, opts);
  const ev = comm.events;
  if (ev.active) {
    ev.emit({ type: 'collective-begin', t: now(), rank: comm.rank, size: comm.size, id: run.id, name: run.name, kind: begin.kind, op: begin.request.op, dtype: begin.request.dtype, count: begin.count, bytes: begin.bytes });
  }
  try {
    const requests = await run.phase('negotiate', () => negotiate(comm, run.id, { kind: begin.kind, ...begin.request }, { timeoutMs: run.timeoutMs, varyingShape: begin.varyingShape }));
    let result: T;
    try {
      result = await body(run, requests);
      await run.flush();
    } catch (e) {
      // Data was moving: other ranks may be waiting on us. Tell them all.
      const err = isRingtrainError(e) ? e : new RingtrainError(ErrorCode.Transport, `collective #${run.id} '${run.name}' failed on rank ${comm.rank}: ${(e as Error).message}`, { rank: comm.rank }, { cause: e });
      comm.abort(err);
      throw comm.error ?? err;
    }
    if (ev.active) ev.emit({ type: 'collective-end', t: now(), rank: comm.rank, id: run.id, name: run.name, ok: true });
    return result;
  } catch (e) {
    if (ev.active) ev.emit({ type: 'collective-end', t: now(), rank: comm.rank, id: run.id, name: run.name, ok: false, error: (e as Error).message });
    throw e;
  }
}

/** Checks shared by every collective's arguments. */
export function validate(comm: Communicator, data: unknown, opts: CollectiveOptions, what: string): asserts data is Tensor {
  if (!dtypeOf(data)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: the tensor must be a Float32Array, Int32Array, Int8Array or Uint16Array (float16 bits), got ${Object.prototype.toString.call(data)}`);
  }
  if (opts.segmentBytes !== undefined && !(Number.isFinite(opts.segmentBytes) && opts.segmentBytes >= 2)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: segmentBytes must be a number >= 2, got ${opts.segmentBytes}`);
  }
  if (opts.timeoutMs !== undefined && !(Number.isFinite(opts.timeoutMs) && opts.timeoutMs > 0)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: timeoutMs must be a positive number, got ${opts.timeoutMs}`);
  }
  const length = (data as Tensor).length;
  if (opts.shape) {
    const n = Array.isArray(opts.shape) ? opts.shape.reduce((a, b) => a * b, 1) : NaN;
    if (!Array.isArray(opts.shape) || !opts.shape.every((d) => Number.isInteger(d) && d >= 0) || n !== length) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `${what}: shape ${JSON.stringify(opts.shape)} does not describe ${length} elements`);
    }
  }
  if (comm.error) throw comm.error;
}
