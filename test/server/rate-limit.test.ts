import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../server/rate-limit.ts';

describe('TokenBucket (fake clock)', () => {
  const opts = { capacity: 10, refillPerS: 5, bytesPerUnit: 1000, maxDrops: 3, floodWindowMs: 10_000 };

  it('lets a burst of capacity through, then refills at refillPerS', () => {
    let t = 0;
    const b = new TokenBucket(opts, () => t);
    let passed = 0;
    for (let i = 0; i < 20; i++) if (b.take(10)) passed++;
    expect(passed).toBe(10);
    t += 1000; // one second: five units back
    passed = 0;
    for (let i = 0; i < 20; i++) if (b.take(10)) passed++;
    expect(passed).toBe(5);
    t += 60_000; // never more than capacity
    passed = 0;
    for (let i = 0; i < 20; i++) if (b.take(10)) passed++;
    expect(passed).toBe(10);
  });

  it('charges big frames more, and reports a connection that keeps flooding', () => {
    let t = 0;
    const b = new TokenBucket(opts, () => t);
    expect(b.take(4500)).toBe(true); // 1 + 4 units
    expect(b.take(4500)).toBe(true); // 10 used
    expect(b.take(0)).toBe(false);
    expect(b.exhausted).toBe(false);
    b.take(0);
    b.take(0);
    expect(b.dropsInARow).toBe(3);
    expect(b.exhausted).toBe(true);
  });

  it('counts drops per window, not only in a row: a steady overload is a flood too', () => {
    let t = 0;
    const b = new TokenBucket({ ...opts, maxDrops: 20 }, () => t);
    for (let i = 0; i < 10; i++) b.take(0);
    // Ten messages a second on a five-per-second budget: every other one dropped.
    for (let i = 0; i < 38 && !b.exhausted; i++) {
      t += 100;
      b.take(0);
    }
    expect(b.dropsInARow).toBeLessThanOrEqual(2);
    expect(b.exhausted).toBe(false);
    t += 100;
    b.take(0);
    t += 100;
    b.take(0);
    expect(b.dropsInWindow).toBe(20);
    expect(b.exhausted).toBe(true);
    // A new window forgives the past.
    t += 20_000;
    expect(b.take(0)).toBe(true);
    for (let i = 0; i < 10; i++) b.take(0);
    expect(b.dropsInWindow).toBe(1);
  });
});
