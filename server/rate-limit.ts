/**
 * A token bucket per connection: `capacity` units of burst, refilled at
 * `refillPerS`. A message costs one unit plus one per `bytesPerUnit` of frame,
 * so a flood of big frames drains it faster than a flood of small ones.
 * Dropped messages are counted per window; too many and the connection is closed.
 *
 * The check runs before JSON parsing, so a dropped message costs almost nothing:
 * a flooding connection cannot take the event loop away from other jobs.
 */
export interface RateLimitOptions {
  /** Burst size, in units. */
  capacity: number;
  /** Units added per second. */
  refillPerS: number;
  /** Frame bytes that cost one extra unit. */
  bytesPerUnit: number;
  /** Messages dropped within one `floodWindowMs` before the connection is closed as a flood. */
  maxDrops: number;
  floodWindowMs: number;
}

export const DEFAULT_RATE_LIMIT: RateLimitOptions = {
  capacity: 200,
  refillPerS: 100,
  bytesPerUnit: 8 * 1024,
  maxDrops: 1000,
  floodWindowMs: 10_000,
};

export class TokenBucket {
  private tokens: number;
  private last: number;
  /** Messages dropped since the last one let through (1 starts a run: time for one notice). */
  dropsInARow = 0;
  /** Messages dropped in the current flood window. */
  dropsInWindow = 0;
  private windowStart: number;

  constructor(
    private readonly opts: RateLimitOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.tokens = opts.capacity;
    this.last = clock();
    this.windowStart = this.last;
  }

  /** Takes the cost of a frame of `bytes`; false when the bucket is empty (drop the frame). */
  take(bytes: number): boolean {
    const t = this.clock();
    this.tokens = Math.min(this.opts.capacity, this.tokens + ((t - this.last) / 1000) * this.opts.refillPerS);
    this.last = t;
    const cost = 1 + Math.floor(bytes / this.opts.bytesPerUnit);
    if (this.tokens >= cost) {
      this.tokens -= cost;
      this.dropsInARow = 0;
      return true;
    }
    this.dropsInARow++;
    if (t - this.windowStart > this.opts.floodWindowMs) {
      this.windowStart = t;
      this.dropsInWindow = 0;
    }
    this.dropsInWindow++;
    return false;
  }

  /**
   * True once the connection dropped `maxDrops` messages within one window: it
   * is not a peer sending a burst but a flood: close it. (A peer at twice the
   * refill rate for a whole window counts too: no legitimate peer sends that much.)
   */
  get exhausted(): boolean {
    return this.dropsInWindow >= this.opts.maxDrops;
  }
}
