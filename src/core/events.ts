/**
 * The event stream: the one seam between the library and everything that
 * watches it (the Chrome-trace timeline, the page's live ring, the CLI progress
 * bar, the teaching mode). The library emits; watchers only render.
 *
 * Times are milliseconds from `now()` (performance.now where available).
 */

/** Phases of a collective, as the timeline and the ring view name them. */
export type Phase =
  | 'negotiate'
  | 'reduce-scatter'
  | 'allgather'
  | 'broadcast'
  | 'alltoall'
  | 'recursive-doubling'
  | 'halving-doubling'
  | 'two-shot'
  | 'barrier'
  | 'fusion-pack'
  | 'fusion-unpack'
  // Any other allreduce algorithm's name (src/collectives/algorithms/): its phase is named after it.
  | (string & {});

/** Which transport carries this rank's link to `peer` ('tcp', 'webrtc'). */
export interface LinkTransport {
  peer: number;
  transport: string;
}

export type RingEvent =
  /** A collective starts on this rank. */
  | {
      type: 'collective-begin';
      t: number;
      rank: number;
      size: number;
      id: number;
      name: string;
      kind: string;
      op?: string;
      dtype: string;
      count: number;
      bytes: number;
    }
  | { type: 'collective-end'; t: number; rank: number; id: number; name: string; ok: boolean; error?: string }
  | { type: 'phase-begin'; t: number; rank: number; id: number; phase: Phase }
  | { type: 'phase-end'; t: number; rank: number; id: number; phase: Phase }
  /**
   * One chunk leaves `from` for `to`. `chunk` is the ring chunk index (which
   * 1/N of the tensor), `step` the ring step within the phase. `values` is set
   * only when the event bus asks for values (teaching mode: small vectors).
   */
  | {
      type: 'chunk-send';
      t: number;
      rank: number;
      id: number;
      phase: Phase;
      step: number;
      from: number;
      to: number;
      chunk: number;
      offset: number;
      count: number;
      bytes: number;
      values?: number[];
    }
  | {
      type: 'chunk-recv';
      t: number;
      rank: number;
      id: number;
      phase: Phase;
      step: number;
      from: number;
      to: number;
      chunk: number;
      offset: number;
      count: number;
      bytes: number;
      values?: number[];
      result?: number[];
    }
  /** The stall inspector: ranks we have waited on too long. */
  | { type: 'stall'; t: number; rank: number; id: number; name: string; waitingFor: number[]; waitedMs: number }
  /** Training progress on one rank. */
  /** This rank waited `ms` from `t` for the GPU to hand back `what` (a read-back), apart from the ring's phases. */
  | { type: 'gpu-wait'; t: number; rank: number; what: string; ms: number; bucket?: [index: number, count: number] }
  | { type: 'compute-begin'; t: number; rank: number; step: number }
  | { type: 'compute-end'; t: number; rank: number; step: number }
  | {
      type: 'train-step';
      t: number;
      rank: number;
      size: number;
      step: number;
      epoch: number;
      loss: number;
      samples: number;
      samplesPerS: number;
      bytesSent: number;
      /** Under --precision f16-mixed: the loss scale S the step ran with, and whether its update was skipped (an overflow). */
      lossScale?: number;
      skipped?: boolean;
    }
  | { type: 'evaluate'; t: number; rank: number; step: number; epoch: number; testAccuracy: number; testLoss?: number }
  /** Membership as the server tells it. */
  | {
      type: 'membership';
      t: number;
      rank: number;
      size: number;
      epoch: number;
      peers: { rank: number; id: string; runtime?: string }[];
      links?: LinkTransport[];
    }
  | { type: 'peer-lost'; t: number; rank: number; peer: number; reason: string }
  /** Rank `peer` broke the rules (seen by `rank`); elastic jobs ask the server to eject it. */
  | { type: 'peer-misbehaved'; t: number; rank: number; peer: number; reason: string }
  /** A member of the membership `epoch` (rank `peer` there) never opened its data channel and is no voter: reported to the server. */
  | { type: 'peer-unconnected'; t: number; rank: number; peer: number; epoch: number; reason: string }
  /** Rank `peer`'s contribution to `step` was doubtful (seen by `rank`) and left out of that step's sum; nobody is named for it. */
  | { type: 'contribution-left-out'; t: number; rank: number; peer: number; step: number; reason: string }
  /**
   * An admission probe (staged admission) with the joiner or member `peer` opened or ended on this
   * peer, beside training; `rank` is -1 while this peer is a candidate itself. `ok` and `reason` come with the end.
   */
  | {
      type: 'admission-probe';
      t: number;
      rank: number;
      probe: number;
      side: number;
      peer: string;
      phase: 'begin' | 'end';
      ok?: boolean;
      reason?: string;
    }
  /** Rank `peer`'s state hash at `step` differed from the majority's (seen by `rank`): it is resynced from rank `resyncFrom`. */
  | {
      type: 'state-differs';
      t: number;
      rank: number;
      peer: number;
      step: number;
      hash: string;
      majorityHash: string;
      resyncFrom: number;
    };

export type RingEventType = RingEvent['type'];
export type Listener = (e: RingEvent) => void;

/** A tiny synchronous emitter. Listeners must not throw; if one does, it is removed and the error logged. */
export class EventBus {
  private listeners = new Set<Listener>();
  /**
   * Whether chunk events carry the numbers they move (`values`, `result`):
   * the page's teaching mode asks for them on small vectors; everyone else
   * leaves them off, since copying every gradient into events costs.
   */
  readonly withValues: boolean;
  constructor(options: { withValues?: boolean } = {}) {
    this.withValues = options.withValues ?? false;
  }
  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  get active(): boolean {
    return this.listeners.size > 0;
  }
  emit(e: RingEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.listeners.delete(l);
        console.error('ringtrain: an event listener threw and was removed:', err);
      }
    }
  }
}

const perf = (globalThis as { performance?: { now(): number } }).performance;
export const now: () => number = perf ? () => perf.now() : () => Date.now();
