/** SendAhead: a ring loop's first sends go a window ahead of what it has received, never all at once. */
import { describe, expect, it } from 'vitest';
import { SEND_AHEAD, SendAhead } from '../../src/collectives/transfer/send-ahead.ts';

function recorder(count: number, window?: number) {
  const sent: number[] = [];
  const ahead = new SendAhead(count, (j) => sent.push(j), window);
  return { sent, ahead };
}

describe('SendAhead', () => {
  it('sends the first window at once, then one more per segment waited for, in order', () => {
    const { sent, ahead } = recorder(40, 4);
    expect(sent).toEqual([0, 1, 2, 3]);
    ahead.before(0);
    expect(sent).toEqual([0, 1, 2, 3, 4]);
    ahead.before(0); // asked again: nothing new
    ahead.before(10);
    expect(sent).toEqual(Array.from({ length: 15 }, (_, j) => j));
    ahead.rest();
    expect(sent).toEqual(Array.from({ length: 40 }, (_, j) => j));
    ahead.rest();
    expect(sent.length).toBe(40);
  });

  it('never sends past the count, and a range shorter than the window goes at once', () => {
    const { sent, ahead } = recorder(3);
    expect(sent).toEqual([0, 1, 2]);
    ahead.before(100);
    expect(sent).toEqual([0, 1, 2]);
    expect(recorder(0).sent).toEqual([]);
  });

  it('keeps the default window to a few MiB of 256 KiB segments', () => {
    const { sent } = recorder(1000);
    expect(sent.length).toBe(SEND_AHEAD);
    expect(SEND_AHEAD * 256 * 1024).toBeLessThanOrEqual(8 << 20);
  });
});
