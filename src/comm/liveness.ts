/**
 * Telling a silent peer from a slow one. A peer that exits or crashes is
 * reported at once (its link closes), but one that is alive and silent (a
 * frozen tab, a hung process) would hold a collective forever. So every link
 * carries a heartbeat when it is otherwise quiet, a peer silent past the
 * timeout is lost, and one silent half that long is reported as a stall (the
 * stall inspector's early warning). Kept apart from the communicator because
 * it is a clock, not a message path: it only reads when a peer was last heard
 * and asks the communicator to drop a peer.
 */
import { type EventBus, now } from '../core/events.ts';
import { encodeFrames, FrameKind } from './frame.ts';
import type { Link } from './link.ts';

/** The `name` of a stall event that reports a silent link rather than a late collective. */
export const QUIET_LINK = '(silent link)';

const HEARTBEAT = encodeFrames(FrameKind.Heartbeat, { id: 0, step: 0, chunk: 0 }, new Uint8Array(0))[0];

export interface LivenessSettings {
  /** Send a heartbeat to a quiet peer this often (ms). */
  heartbeatMs: number;
  /** A peer silent this long (ms) is lost; 0 turns heartbeats off. */
  peerTimeoutMs: number;
  /** No heartbeat is queued on a link whose buffer holds this many bytes (it is not quiet). */
  highWaterBytes: number;
}

/** What the watch asks of its communicator. */
export interface LivenessHost {
  /** Whether `peer` left cleanly (its silence is expected). */
  departed(peer: number): boolean;
  /** `peer` is gone: abort the ring naming it. */
  lose(peer: number, reason: string): void;
}

export class LinkLiveness {
  private lastHeard = new Map<number, number>();
  /** Peers already reported as going quiet in their current silence. */
  private quietReported = new Set<number>();
  private lastSent = new Map<number, number>();
  private heartbeat?: ReturnType<typeof setInterval>;
  private lastTick = now();

  constructor(
    private readonly rank: number,
    private readonly links: Map<number, Link>,
    private readonly settings: LivenessSettings,
    private readonly events: EventBus,
    private readonly host: LivenessHost,
  ) {
    const t = now();
    for (const peer of links.keys()) {
      this.lastHeard.set(peer, t);
      this.lastSent.set(peer, t);
    }
  }

  /** Starts the heartbeat timer, unless heartbeats are off or there is no one to hear. */
  start(): void {
    if (this.settings.peerTimeoutMs > 0 && this.links.size > 0) {
      this.heartbeat = setInterval(() => this.tick(), this.settings.heartbeatMs);
      (this.heartbeat as { unref?: () => void }).unref?.();
    }
  }

  stop(): void {
    clearInterval(this.heartbeat);
  }

  /** Something arrived from `peer`. */
  heard(peer: number): void {
    this.lastHeard.set(peer, now());
  }

  /** Something went out to `peer`: no heartbeat is owed it for a while. */
  sent(peer: number): void {
    this.lastSent.set(peer, now());
  }

  private tick(): void {
    const t = now();
    // If this timer ran late the event loop was blocked, so silence proves nothing: start over.
    const late = t - this.lastTick > 3 * this.settings.heartbeatMs;
    this.lastTick = t;
    for (const [peer, link] of this.links) {
      if (this.host.departed(peer)) continue;
      if (late) this.lastHeard.set(peer, t);
      const silentMs = t - this.lastHeard.get(peer)!;
      if (silentMs > this.settings.peerTimeoutMs) {
        this.host.lose(peer, `silent for ${Math.round(silentMs)} ms`);
        return;
      }
      // Half-way to being dropped, say who has gone quiet: the stall inspector's early warning,
      // whatever the ring is doing (a frozen rank may hold up a collective's data, not only its negotiation).
      if (silentMs <= this.settings.peerTimeoutMs / 2) {
        this.quietReported.delete(peer); // heard from again: a later silence is news again
      } else if (!this.quietReported.has(peer)) {
        this.quietReported.add(peer);
        if (this.events.active)
          this.events.emit({
            type: 'stall',
            t,
            rank: this.rank,
            id: -1,
            name: QUIET_LINK,
            waitingFor: [peer],
            waitedMs: silentMs,
          });
      }
      if (
        t - this.lastSent.get(peer)! >= this.settings.heartbeatMs &&
        link.bufferedAmount() < this.settings.highWaterBytes
      ) {
        try {
          link.send(HEARTBEAT);
          this.lastSent.set(peer, t);
        } catch {
          // its close handler reports it
        }
      }
    }
  }
}
