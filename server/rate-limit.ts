/**
 * A token bucket per connection: `capacity` units of burst, refilled at
 * `refillPerS`. A message costs one unit plus one per `bytesPerUnit` of frame,
 * so a flood of big frames drains it faster than a flood of small ones.
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
  /** Messages dropped in a row (no successful take between) before the connection is closed. */
  maxDropsInARow: number;
}

export const DEFAULT_RATE_LIMIT: RateLimitOptions = {
  capacity: 200,
  refillPerS: 100,
  bytesPerUnit: 8 * 1024,
  maxDropsInARow: 1000,
};

export class TokenBucket {
  private tokens: number;
  private last: number;
  /** Messages dropped since the last one let through. */
  dropsInARow = 0;

  constructor(
    private readonly opts: RateLimitOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.tokens = opts.capacity;
    this.last = clock();
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
    return false;
  }

  /** True once the connection kept flooding past the drop allowance: close it. */
  get exhausted(): boolean {
    return this.dropsInARow >= this.opts.maxDropsInARow;
  }
}
