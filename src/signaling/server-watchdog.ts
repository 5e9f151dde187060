/**
 * How a peer notices that its signaling server is gone without a close (a
 * cut network, a frozen host). The server pings every `heartbeatMs` and drops
 * a peer silent for `missedHeartbeats` intervals; the client holds the server
 * to the same rule. Kept apart from the client's message handling because it
 * is a clock: it only reads when the server was last heard.
 */
import { now } from '../core/events.ts';

/**
 * Calls `onSilent` (every tick, until stopped) while nothing was heard from the server for longer
 * than it allows a peer; returns the timer for clearInterval.
 */
export function watchServer(
  heartbeatMs: number,
  missedHeartbeats: number,
  lastSeen: () => number,
  onSilent: (silentMs: number) => void,
): ReturnType<typeof setInterval> {
  // The server pings every heartbeatMs; silence for longer than it allows a peer means it is gone.
  const silentMs = heartbeatMs * (missedHeartbeats + 1);
  let lastTick = now();
  const watchdog = setInterval(() => {
    const t = now();
    // A late tick means this peer was stalled (a long training step, a background tab):
    // the server's messages are still queued, so do not judge it this round.
    const late = t - lastTick > heartbeatMs * 2;
    lastTick = t;
    if (!late && t - lastSeen() > silentMs) onSilent(silentMs);
  }, heartbeatMs);
  (watchdog as { unref?: () => void }).unref?.();
  return watchdog;
}
