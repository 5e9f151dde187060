import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../server/rate-limit.ts';

describe('TokenBucket (fake clock)', () => {
  const opts = { capacity: 10, refillPerS: 5, bytesPerUnit: 1000, maxDropsInARow: 3 };

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
    const t = 0;
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
});
