/**
 * Chrome-trace timeline (opens in Perfetto and chrome://tracing), built only
 * from RingEvents. One process per rank (pid = rank), one thread per kind of
 * activity, so compute, negotiation, the two allreduce phases and the chunk
 * traffic sit on separate tracks.
 *
 * Ranks live in different processes whose performance.now() clocks start at
 * different moments, so every timestamp is shifted by that rank's timeOrigin
 * onto the shared wall clock before it is written.
 */
import { now, type EventBus, type Phase, type RingEvent } from '../../core/events.ts';
import { ExposedWait } from './exposed-wait.ts';

/** One entry of the Trace Event Format (the fields we use). */
export interface TraceEvent {
  name: string;
  ph: 'X' | 'i' | 'M' | 'B' | 'E' | 'C';
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  s?: 't' | 'p' | 'g';
  cat?: string;
  args?: Record<string, unknown>;
}

const TRACK = { compute: 1, negotiate: 2, collective: 3, send: 4, recv: 5, membership: 6, gpu: 7 } as const;
/**
 * A collective that begins while others run (a gradient bucket beside the one before it, the step
 * checks' allgather beside the sum) gets a track of its own, LANE_TRACK + k, with its phases: spans
 * on one track must nest, and overlapping ones would be drawn cut or not at all.
 */
const LANE_TRACK = 100;
const TRACK_NAMES: Record<number, string> = {
  [TRACK.compute]: 'compute',
  [TRACK.negotiate]: 'negotiate',
  [TRACK.collective]: 'collective phases',
  [TRACK.send]: 'chunk sends',
  [TRACK.recv]: 'chunk receives',
  [TRACK.membership]: 'membership and stalls',
  [TRACK.gpu]: 'gpu-wait (read-backs)',
};

function trackOf(phase: Phase): number {
  return phase === 'negotiate' ? TRACK.negotiate : TRACK.collective;
}

/** An instant of the trace (ph 'i'), for the events that mark a moment: chunks sent and received, stalls, membership. */
interface Marker {
  name: string;
  s: 't' | 'p' | 'g';
  tid: number;
  cat: string;
  args: Record<string, unknown>;
}

/** The marker an event draws, or null for the events that draw spans and counters (TimelineRecorder.record). */
function markerOf(e: RingEvent): Marker | null {
  switch (e.type) {
    case 'chunk-send':
    case 'chunk-recv':
      return {
        name: `${e.type === 'chunk-send' ? 'send' : 'recv'} chunk ${e.chunk} ${e.from}→${e.to}`,
        s: 't',
        tid: e.type === 'chunk-send' ? TRACK.send : TRACK.recv,
        cat: e.phase,
        args: {
          id: e.id,
          phase: e.phase,
          step: e.step,
          chunk: e.chunk,
          offset: e.offset,
          count: e.count,
          bytes: e.bytes,
        },
      };
    case 'stall':
      return {
        name: `stall: waiting for ranks ${e.waitingFor.join(', ')}`,
        s: 'p',
        tid: TRACK.membership,
        cat: 'stall',
        args: { name: e.name, waitingFor: e.waitingFor, waitedMs: e.waitedMs },
      };
    case 'peer-lost':
    case 'peer-misbehaved':
      return {
        name: `peer ${e.peer} ${e.type === 'peer-lost' ? 'lost' : 'misbehaved'}`,
        s: 'g',
        tid: TRACK.membership,
        cat: 'membership',
        args: { peer: e.peer, reason: e.reason },
      };
    case 'contribution-left-out':
      return {
        name: `peer ${e.peer}'s step ${e.step} left out`,
        s: 'g',
        tid: TRACK.membership,
        cat: 'membership',
        args: { peer: e.peer, step: e.step, reason: e.reason },
      };
    case 'state-differs':
      return {
        name: `peer ${e.peer}'s state differs at step ${e.step}`,
        s: 'g',
        tid: TRACK.membership,
        cat: 'membership',
        args: { peer: e.peer, step: e.step, hash: e.hash, majorityHash: e.majorityHash, resyncFrom: e.resyncFrom },
      };
    case 'membership':
      return {
        name: `membership epoch ${e.epoch} (size ${e.size})`,
        s: 'p',
        tid: TRACK.membership,
        cat: 'membership',
        args: { epoch: e.epoch, peers: e.peers, ...(e.links ? { links: e.links } : {}) },
      };
    default:
      return null;
  }
}

/** One step's (or a run's) collectives and negotiations on one rank. */
export interface Rounds {
  collectives: number;
  /**
   * Collectives that began while none of this rank's others was running: the ones a step
   * waits for one after another (the step checks' allgather beside the gradient allreduce is one).
   */
  sequential: number;
  /** Collectives that went to the coordinator: the others went ahead on the response cache, no round trip spent agreeing. */
  negotiations: number;
  /** Collectives by name (fused and chunked names as they ran). */
  byName: Record<string, number>;
  /** Gradient buckets read back and reduced as backward finished them (overlap.ts); 0 when the step read its gradients whole. */
  buckets: number;
  /** Exposed allreduce (exposed-wait.ts), ms: from the end of the gradients' read-back to the step's close; null: none read. */
  exposedMs: number | null;
}

/**
 * Counts one rank's collectives and negotiations between its training steps: what the
 * timeline's 'rounds' counter shows and what `run --json` reports per step. Feed it the
 * rank's events; `step()` closes a step and returns its counts. An evaluation between steps
 * (its metrics' average) is no step's: `setAside` keeps its collectives out of the counts.
 */
export class RoundCounter {
  /** Set while the rank runs something that is no step's (an evaluation): its collectives are not counted. */
  setAside = false;
  private now: Rounds = empty();
  private steady: Rounds = empty();
  private steps = 0;
  private running = new Set<number>();
  /** A later gradient bucket was just read back: what begins next waited for backward, not for the ring. */
  private afterBucket = false;
  /** Whether a collective began since this step's first bucket was read back (the buckets' round is open). */
  private bucketRound = false;
  private readonly exposed = new ExposedWait();

  record(e: RingEvent): void {
    if (this.setAside) return;
    this.exposed.record(e);
    if (e.type === 'collective-begin') {
      // A step's buckets are one round however their read-backs fall: one that begins after the
      // bucket before it is done found the ring waiting on backward, not the step waiting on the ring.
      // (A rank that reads every bucket before reducing any opens its round with the first collective after them.)
      if (this.running.size === 0 && !(this.afterBucket && this.bucketRound)) this.now.sequential++;
      this.afterBucket = false;
      this.bucketRound = true;
      this.running.add(e.id);
      this.now.collectives++;
      this.now.byName[e.name] = (this.now.byName[e.name] ?? 0) + 1;
    } else if (e.type === 'collective-end') this.running.delete(e.id);
    else if (e.type === 'phase-begin' && e.phase === 'negotiate') this.now.negotiations++;
    else if (e.type === 'gpu-wait' && e.bucket) {
      this.now.buckets++;
      this.afterBucket = e.bucket[0] > 1;
      if (e.bucket[0] === 1) this.bucketRound = false;
    }
  }

  /**
   * Closes a step at `t` (the events' clock; now: the update is applied). The first step negotiates
   * everything for the first time; later ones are the steady state.
   */
  step(t = now()): Rounds {
    const done = { ...this.now, exposedMs: this.exposed.step(t) };
    this.now = empty();
    if (this.steps++ > 0) {
      this.steady.collectives += done.collectives;
      this.steady.sequential += done.sequential;
      this.steady.negotiations += done.negotiations;
      this.steady.buckets += done.buckets;
      for (const [k, v] of Object.entries(done.byName)) this.steady.byName[k] = (this.steady.byName[k] ?? 0) + v;
    }
    return done;
  }

  /** Per step, over every step but the first (null before the second step). */
  perStep(): Rounds | null {
    const n = this.steps - 1;
    if (n < 1) return null;
    const byName: Record<string, number> = {};
    for (const [k, v] of Object.entries(this.steady.byName)) byName[k] = v / n;
    return {
      collectives: this.steady.collectives / n,
      sequential: this.steady.sequential / n,
      negotiations: this.steady.negotiations / n,
      byName,
      buckets: this.steady.buckets / n,
      exposedMs: this.exposed.perStepMs(),
    };
  }
}

function empty(): Rounds {
  return { collectives: 0, sequential: 0, negotiations: 0, byName: {}, buckets: 0, exposedMs: null };
}

/** Records RingEvents of one or more ranks and turns them into trace events. */
export class TimelineRecorder {
  private readonly events: TraceEvent[] = [];
  private readonly open = new Map<string, { ts: number; tid?: number; args?: Record<string, unknown> }>();
  private readonly ranksSeen = new Set<number>();
  /** Per rank: the lane of each running collective (0: the usual tracks), and how many lanes it ever used. */
  private readonly lanes = new Map<number, Map<number, number>>();
  private readonly laneCount = new Map<number, number>();
  private readonly rounds = new Map<number, RoundCounter>();
  /** Per rank: admission probes open now (the 'admission probes' counter). */
  private readonly probesOpen = new Map<number, number>();

  /** @param timeOriginMs this process's performance.timeOrigin (ms since the Unix epoch). */
  constructor(private readonly timeOriginMs: number = defaultTimeOrigin()) {}

  /** Subscribes to a bus; returns the unsubscribe function. */
  attach(bus: EventBus): () => void {
    return bus.on((e) => this.record(e));
  }

  private us(t: number): number {
    return Math.round((this.timeOriginMs + t) * 1000);
  }

  private begin(key: string, t: number, args?: Record<string, unknown>, tid?: number): void {
    this.open.set(key, { ts: this.us(t), tid, args });
  }

  /** The lowest lane no running collective of this rank holds. */
  private takeLane(pid: number, id: number): number {
    let running = this.lanes.get(pid);
    if (!running) this.lanes.set(pid, (running = new Map()));
    const held = new Set(running.values());
    let lane = 0;
    while (held.has(lane)) lane++;
    running.set(id, lane);
    this.laneCount.set(pid, Math.max(this.laneCount.get(pid) ?? 0, lane));
    return lane;
  }

  /** Where a collective's span and phase go: the usual tracks in lane 0, one track per lane beside. */
  private trackOf(pid: number, id: number, phase?: Phase): number {
    const lane = this.lanes.get(pid)?.get(id) ?? 0;
    if (lane > 0) return LANE_TRACK + lane;
    return phase ? trackOf(phase) : TRACK.collective;
  }

  private end(
    key: string,
    t: number,
    name: string,
    pid: number,
    tid: number,
    cat: string,
    extra?: Record<string, unknown>,
  ): void {
    const start = this.open.get(key);
    if (!start) return; // an end without a begin (recorder attached mid-collective): nothing to draw
    this.open.delete(key);
    const ts = this.us(t);
    this.events.push({
      name,
      ph: 'X',
      ts: start.ts,
      dur: Math.max(0, ts - start.ts),
      pid,
      tid: start.tid ?? tid,
      cat,
      args: { ...start.args, ...extra },
    });
  }

  record(e: RingEvent): void {
    // A candidate's own probes come before it has a rank: the timeline draws ranks only.
    if (e.type === 'admission-probe') return e.rank < 0 ? undefined : this.recordProbe(e);
    this.ranksSeen.add(e.rank);
    const pid = e.rank;
    let counter = this.rounds.get(pid);
    if (!counter) this.rounds.set(pid, (counter = new RoundCounter()));
    counter.record(e);
    const marker = markerOf(e);
    if (marker) {
      const { name, s, tid, cat, args } = marker;
      this.events.push({ name, ph: 'i', s, ts: this.us(e.t), pid, tid, cat, args });
      return;
    }
    switch (e.type) {
      case 'compute-begin':
        this.begin(`c:${pid}:${e.step}`, e.t, { step: e.step });
        break;
      case 'gpu-wait':
        this.events.push({
          name: 'gpu-wait',
          ph: 'X',
          ts: this.us(e.t),
          dur: Math.round(e.ms * 1000),
          pid,
          tid: TRACK.gpu,
          cat: 'gpu-wait',
          args: { what: e.what, ...(e.bucket ? { bucket: e.bucket } : {}) },
        });
        break;
      case 'compute-end':
        this.end(`c:${pid}:${e.step}`, e.t, 'compute', pid, TRACK.compute, 'compute');
        break;
      case 'collective-begin':
        this.takeLane(pid, e.id);
        this.begin(
          `k:${pid}:${e.id}`,
          e.t,
          { name: e.name, kind: e.kind, op: e.op, dtype: e.dtype, count: e.count, bytes: e.bytes },
          this.trackOf(pid, e.id),
        );
        break;
      case 'collective-end':
        this.end(`k:${pid}:${e.id}`, e.t, `collective ${e.name}`, pid, TRACK.collective, 'collective', {
          ok: e.ok,
          error: e.error,
        });
        this.lanes.get(pid)?.delete(e.id);
        break;
      case 'phase-begin':
        this.begin(`p:${pid}:${e.id}:${e.phase}`, e.t, { id: e.id }, this.trackOf(pid, e.id, e.phase));
        break;
      case 'phase-end':
        this.end(`p:${pid}:${e.id}:${e.phase}`, e.t, e.phase, pid, trackOf(e.phase), 'phase');
        break;
      case 'train-step': {
        // A counter track: how many collectives the step ran, how many it waited for one after another, how many
        // negotiated, and how many gradient buckets it reduced as backward finished them.
        const { collectives, sequential, negotiations, buckets } = counter.step(e.t);
        const args = { collectives, sequential, negotiations, buckets };
        this.events.push({
          name: 'rounds',
          ph: 'C',
          ts: this.us(e.t),
          pid,
          tid: TRACK.collective,
          cat: 'rounds',
          args,
        });
        break;
      }
      case 'evaluate':
        // Progress, not activity: the CLI and the page show these; the trace would only clutter.
        break;
    }
  }

  /**
   * An admission probe as a span on the membership track, and a counter of the probes open on the
   * rank: a step drawn under a probe's span ran while it was open (probes never hold up the ring).
   */
  private recordProbe(e: Extract<RingEvent, { type: 'admission-probe' }>): void {
    const pid = e.rank;
    this.ranksSeen.add(pid);
    const key = `a:${pid}:${e.probe}`;
    if (e.phase === 'begin') this.begin(key, e.t, { probe: e.probe, peer: e.peer }, TRACK.membership);
    else
      this.end(key, e.t, `admission probe with ${e.peer}`, pid, TRACK.membership, 'membership', {
        ok: e.ok,
        ...(e.reason ? { reason: e.reason } : {}),
      });
    const open = (this.probesOpen.get(pid) ?? 0) + (e.phase === 'begin' ? 1 : -1);
    this.probesOpen.set(pid, Math.max(0, open));
    this.events.push({
      name: 'admission probes',
      ph: 'C',
      ts: this.us(e.t),
      pid,
      tid: TRACK.membership,
      cat: 'membership',
      args: { open: Math.max(0, open) },
    });
  }

  /** Trace events recorded so far, with process/thread name metadata first. */
  traceEvents(): TraceEvent[] {
    const meta: TraceEvent[] = [];
    for (const rank of [...this.ranksSeen].sort((a, b) => a - b)) {
      meta.push({ name: 'process_name', ph: 'M', ts: 0, pid: rank, tid: 0, args: { name: `rank ${rank}` } });
      meta.push({ name: 'process_sort_index', ph: 'M', ts: 0, pid: rank, tid: 0, args: { sort_index: rank } });
      for (const [tid, name] of Object.entries(TRACK_NAMES)) {
        meta.push({ name: 'thread_name', ph: 'M', ts: 0, pid: rank, tid: Number(tid), args: { name } });
      }
      for (let lane = 1; lane <= (this.laneCount.get(rank) ?? 0); lane++) {
        meta.push({
          name: 'thread_name',
          ph: 'M',
          ts: 0,
          pid: rank,
          tid: LANE_TRACK + lane,
          args: { name: `collectives beside (${lane})` },
        });
      }
    }
    return [...meta, ...this.events];
  }
}

/** Merges the trace events of several ranks (each recorded in its own process) into one trace document. */
export function mergeTraces(parts: TraceEvent[][]): { traceEvents: TraceEvent[]; displayTimeUnit: 'ms' } {
  const seenMeta = new Set<string>();
  const out: TraceEvent[] = [];
  for (const part of parts) {
    for (const e of part) {
      if (e.ph === 'M') {
        const key = `${e.pid}:${e.tid}:${e.name}`;
        if (seenMeta.has(key)) continue;
        seenMeta.add(key);
      }
      out.push(e);
    }
  }
  out.sort((a, b) => (a.ph === 'M' ? -1 : 0) - (b.ph === 'M' ? -1 : 0) || a.ts - b.ts);
  return { traceEvents: out, displayTimeUnit: 'ms' };
}

function defaultTimeOrigin(): number {
  const perf = (globalThis as { performance?: { timeOrigin?: number } }).performance;
  return perf?.timeOrigin ?? Date.now();
}
