/**
 * The liveness loop: every heartbeatMs each connection pings its peer, and a
 * joined peer silent for missedHeartbeats rounds is dropped (Connection.heartbeat).
 */
import type { Connection } from './connection.ts';

/** Starts the loop (it does not keep the process alive); returns what stops it. */
export function startHeartbeat(connections: Iterable<Connection>, heartbeatMs: number): () => void {
  let lastBeat = performance.now();
  const beat = setInterval(() => {
    const t = performance.now();
    // A tick that comes late means this process was stalled (GC, a busy CPU), not its
    // peers: their answers are still queued, so judge nobody this round.
    const judge = t - lastBeat < heartbeatMs * 2;
    lastBeat = t;
    for (const c of connections) c.heartbeat(t, judge);
  }, heartbeatMs);
  beat.unref();
  return () => clearInterval(beat);
}
