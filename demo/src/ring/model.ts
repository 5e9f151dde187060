/**
 * The live ring's state, folded from RingEvents and nothing else: who is in
 * the ring, which chunks are on which link right now, how fast each link has
 * carried bytes lately, and which peers stall or left. The SVG view only draws
 * a snapshot of this; keeping the fold pure lets tests feed it events directly.
 */
import type { Phase, RingEvent } from '../../../src/core/events.ts';

/** How far back a link's throughput looks. */
export const THROUGHPUT_WINDOW_MS = 2000;
/** A chunk whose arrival we never see (the receiver is another machine) leaves the picture after this. */
export const IN_FLIGHT_MAX_MS = 800;

export interface PeerState {
  rank: number;
  id?: string;
  runtime?: string;
  phase?: Phase;
  /** Set while some rank reports waiting on this one (stall inspector). */
  stalledMs?: number;
  lost?: string;
}

export interface ChunkInFlight {
  key: string;
  from: number;
  to: number;
  chunk: number;
  phase: Phase;
  t: number;
  bytes: number;
}

export interface LinkSnapshot {
  from: number;
  to: number;
  /** Bytes per second over the last THROUGHPUT_WINDOW_MS. */
  bytesPerS: number;
  phase?: Phase;
}

export interface RingSnapshot {
  size: number;
  /** The rank of this tab, when it is a peer. */
  self?: number;
  peers: PeerState[];
  links: LinkSnapshot[];
  inFlight: ChunkInFlight[];
}

function linkKey(from: number, to: number): string {
  return `${from}>${to}`;
}

function chunkKey(e: {
  id: number;
  phase: Phase;
  step: number;
  from: number;
  to: number;
  chunk: number;
  offset: number;
}): string {
  return `${e.id}/${e.phase}/${e.step}/${e.from}>${e.to}/${e.chunk}@${e.offset}`;
}

export class RingModel {
  size = 0;
  self?: number;
  private epoch = -1;
  private peers = new Map<number, PeerState>();
  private sent = new Map<string, { t: number; bytes: number }[]>();
  private linkPhase = new Map<string, Phase | undefined>();
  /** Last cumulative bytes-sent a rank reported (train-step), for ranks whose chunks we never see. */
  private reportedBytes = new Map<number, number>();
  private flying = new Map<string, ChunkInFlight>();
  /** Ranks whose own chunk-send events reach us (this tab, or every virtual peer in teaching mode). */
  private sendersSeen = new Set<number>();
  /** Ranks whose chunks arrive here: their link's traffic is counted from those arrivals. */
  private heardFrom = new Set<number>();

  apply(e: RingEvent): void {
    switch (e.type) {
      case 'membership':
        // Ranks are renumbered in a new epoch: old byte counts belong to other peers now.
        if (e.epoch !== this.epoch) {
          this.reportedBytes.clear();
          this.sendersSeen.clear();
          this.heardFrom.clear();
        }
        this.epoch = e.epoch;
        this.size = e.size;
        this.self = e.rank;
        this.peers = new Map(e.peers.map((p) => [p.rank, { rank: p.rank, id: p.id, runtime: p.runtime }]));
        break;
      // Size comes from the ring's own events, not from train-step: a tab training alone is no ring.
      case 'collective-begin':
        this.growTo(e.size);
        break;
      case 'phase-begin':
        this.peer(e.rank).phase = e.phase;
        break;
      case 'phase-end':
        if (this.peer(e.rank).phase === e.phase) this.peer(e.rank).phase = undefined;
        break;
      case 'chunk-send': {
        this.growTo(Math.max(e.from, e.to) + 1);
        if (e.rank === e.from) this.sendersSeen.add(e.from);
        this.countBytes(e.from, e.to, e.t, e.bytes, e.phase);
        this.flying.set(chunkKey(e), {
          key: chunkKey(e),
          from: e.from,
          to: e.to,
          chunk: e.chunk,
          phase: e.phase,
          t: e.t,
          bytes: e.bytes,
        });
        this.peer(e.from).stalledMs = undefined;
        break;
      }
      case 'train-step': {
        // Another machine's rank (its progress relayed by the server): in a ring it sends only to its
        // right-hand neighbour, so what it reports sending is that link's traffic. The phase is unknown.
        if (this.sendersSeen.has(e.rank) || this.heardFrom.has(e.rank) || this.size < 2) break;
        const before = this.reportedBytes.get(e.rank);
        this.reportedBytes.set(e.rank, e.bytesSent);
        if (before !== undefined && e.bytesSent > before)
          this.countBytes(e.rank, (e.rank + 1) % this.size, e.t, e.bytesSent - before, undefined);
        break;
      }
      case 'chunk-recv':
        this.flying.delete(chunkKey(e));
        // The sender is another machine: its link's traffic is known only from what arrives here.
        if (!this.sendersSeen.has(e.from)) {
          this.heardFrom.add(e.from);
          this.countBytes(e.from, e.to, e.t, e.bytes, e.phase);
        }
        this.peer(e.from).stalledMs = undefined;
        break;
      case 'stall':
        for (const r of e.waitingFor) this.peer(r).stalledMs = e.waitedMs;
        break;
      case 'collective-end':
        if (e.ok) for (const p of this.peers.values()) p.stalledMs = undefined;
        break;
      case 'peer-lost':
        this.peer(e.peer).lost = e.reason;
        break;
      case 'peer-misbehaved':
        // The page names the rank that broke the rules; the ring drops it like a lost peer.
        this.peer(e.peer).lost = `misbehaved: ${e.reason}`;
        break;
      default:
        break;
    }
  }

  /** What to draw at time `t` (same clock as the events). */
  snapshot(t: number): RingSnapshot {
    const links: LinkSnapshot[] = [];
    for (let r = 0; r < this.size; r++) {
      const to = (r + 1) % this.size;
      const k = linkKey(r, to);
      const window = (this.sent.get(k) ?? []).filter((s) => t - s.t <= THROUGHPUT_WINDOW_MS);
      this.sent.set(k, window);
      const bytes = window.reduce((sum, s) => sum + s.bytes, 0);
      links.push({
        from: r,
        to,
        bytesPerS: (bytes * 1000) / THROUGHPUT_WINDOW_MS,
        phase: window.length ? this.linkPhase.get(k) : undefined,
      });
    }
    for (const [k, c] of this.flying) if (t - c.t > IN_FLIGHT_MAX_MS) this.flying.delete(k);
    const peers = Array.from({ length: this.size }, (_, r) => ({ ...this.peer(r) }));
    return { size: this.size, self: this.self, peers, links, inFlight: [...this.flying.values()] };
  }

  private countBytes(from: number, to: number, t: number, bytes: number, phase: Phase | undefined): void {
    const k = linkKey(from, to);
    const window = this.sent.get(k) ?? [];
    window.push({ t, bytes });
    this.sent.set(k, window);
    this.linkPhase.set(k, phase);
  }

  private growTo(size: number): void {
    if (size > this.size) this.size = size;
  }

  private peer(rank: number): PeerState {
    let p = this.peers.get(rank);
    if (!p) this.peers.set(rank, (p = { rank }));
    return p;
  }
}

/** "12.3 MB/s", "850 kB/s", "—" for an idle link. */
export function formatRate(bytesPerS: number): string {
  if (bytesPerS <= 0) return '—';
  if (bytesPerS >= 1e6) return `${(bytesPerS / 1e6).toFixed(1)} MB/s`;
  if (bytesPerS >= 1e3) return `${(bytesPerS / 1e3).toFixed(0)} kB/s`;
  return `${bytesPerS.toFixed(0)} B/s`;
}
