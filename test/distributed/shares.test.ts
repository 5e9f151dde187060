/**
 * The share rule of `--balance speed` (shares.ts), driven with given timings:
 * no clock is read here. A simulated rank computes n examples in a + b·n ms
 * (a fixed cost per step and a cost per example), one of them K times slower.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import {
  nextShares,
  proportionalShares,
  roundShares,
  ShareBalancer,
  MAX_CHANGE,
} from '../../src/distributed/train/shares.ts';

/** Runs the rule for `steps` steps on ranks whose compute of n examples takes slowness[r] · (a + b·n) ms. */
function settle(
  global: number,
  slowness: number[],
  steps: number,
  noise: (step: number, rank: number) => number = () => 1,
) {
  const history: number[][] = [];
  let shares = Array.from(
    { length: slowness.length },
    (_, r) => Math.floor(global / slowness.length) + (r < global % slowness.length ? 1 : 0),
  );
  for (let t = 0; t < steps; t++) {
    const msPerExample = shares.map((n, r) => (slowness[r] * (2 + 0.5 * n) * noise(t, r)) / n);
    const next = nextShares(shares, msPerExample);
    history.push(next);
    shares = next;
  }
  return { shares, history };
}

describe('batch shares by speed', () => {
  it('give a rank three times slower less, until every rank computes about as long', () => {
    const { shares, history } = settle(128, [1, 1, 3, 1], 20);
    expect(shares.reduce((a, b) => a + b, 0)).toBe(128);
    expect(shares[2]).toBeLessThan(128 / 4 / 2);
    // The fast ranks share alike (within one example).
    expect(Math.max(shares[0], shares[1], shares[3]) - Math.min(shares[0], shares[1], shares[3])).toBeLessThanOrEqual(
      1,
    );
    const times = shares.map((n, r) => [1, 1, 3, 1][r] * (2 + 0.5 * n));
    expect(Math.max(...times) / Math.min(...times)).toBeLessThan(1.25);
    // Each step moved a share by at most a quarter of an equal share (plus one for rounding).
    let prev = [32, 32, 32, 32];
    for (const s of history) {
      for (let r = 0; r < 4; r++) expect(Math.abs(s[r] - prev[r])).toBeLessThanOrEqual(MAX_CHANGE * 32 + 1);
      prev = s;
    }
  });
  it('keep equal peers at equal shares through timing noise of a few percent', () => {
    const wobble = (t: number, r: number) => 1 + 0.04 * Math.sin(7 * t + 3 * r);
    const { history } = settle(96, [1, 1, 1], 30, wobble);
    for (const s of history) expect(s).toEqual([32, 32, 32]);
  });
  it('never give a rank nothing, however slow', () => {
    expect(proportionalShares(10, [1, 1, 1e-9])).toEqual([4.5, 4.5, 1]);
    const { shares } = settle(8, [1, 1000, 1, 1], 40);
    expect(shares[1]).toBeLessThanOrEqual(2); // one example of deadband
    expect(Math.min(...shares)).toBeGreaterThanOrEqual(1);
  });
  it('round to whole examples summing to G, and wait for every rank to have a timing', () => {
    expect(roundShares(10, [3.4, 3.3, 3.3])).toEqual([4, 3, 3]);
    expect(nextShares([5, 5], [0, 2])).toEqual([5, 5]);
    expect(() => proportionalShares(2, [1, 1, 1])).toThrow(/cannot give each of 3 peers/);
  });
  it('agree on every rank of a real ring (one tiny allgather of the timings)', async () => {
    const comms = createMemoryRing(3);
    const balancers = comms.map(() => new ShareBalancer('speed'));
    balancers.forEach((b) => b.reset(30, 3));
    // Rank 1 took 3 ms per example, the others 1 ms.
    balancers.forEach((b, r) => b.observe(10, r === 1 ? 30 : 10));
    const changed = await Promise.all(balancers.map((b, r) => b.rebalance(comms[r])));
    comms.forEach((c) => c.close());
    expect(changed).toEqual([true, true, true]);
    const shares = balancers.map((b) => [...b.shares]);
    expect(shares[1]).toEqual(shares[0]);
    expect(shares[2]).toEqual(shares[0]);
    expect(shares[0][1]).toBeLessThan(10);
    expect(shares[0].reduce((a, b) => a + b, 0)).toBe(30);
  });
  it('refuse an unknown mode', () => {
    expect(() => new ShareBalancer('fastest' as 'speed')).toThrow(/balance must be one of equal, speed/);
  });
});
