import { describe, expect, it } from 'vitest';
import { median } from '../../src/core/stats.ts';

describe('median', () => {
  it('takes the middle of an odd count and the mean of the two middles of an even one, unsorted input', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
  });
  it('is NaN for no values, and leaves its input in place', () => {
    expect(median([])).toBeNaN();
    const xs = [3, 1, 2];
    median(xs);
    expect(xs).toEqual([3, 1, 2]);
  });
});
