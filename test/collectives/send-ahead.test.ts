/**
 * The ring's first step sends at most SEND_AHEAD segments ahead of what it has received
 * (transfer/ring.ts), in reduce-scatter and in allgather, on the whole ring and on the
 * hierarchical allreduce's rings among some ranks; the sums stay exact.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { Communicator } from '../../src/comm/interface.ts';
import { allreduce } from '../../src/collectives/allreduce.ts';
import { SEND_AHEAD } from '../../src/collectives/transfer/ring.ts';
import type { RingEvent } from '../../src/core/events.ts';

/**
 * Per phase, the most first-step segments a rank has sent beyond the first-step segments it has
 * received. The hierarchical allreduce's rings run one after another under one phase name, each
 * with chunks of one size here, so every ring's tally starts where the one before ended, even.
 */
function mostAhead(comm: Communicator): () => Map<string, number> {
  const ahead = new Map<string, { sent: number; got: number; most: number }>();
  comm.events.on((e: RingEvent) => {
    if ((e.type !== 'chunk-send' && e.type !== 'chunk-recv') || e.step !== 0) return;
    const a = ahead.get(e.phase) ?? { sent: 0, got: 0, most: 0 };
    if (e.type === 'chunk-send') a.sent++;
    else a.got++;
    a.most = Math.max(a.most, a.sent - a.got);
    ahead.set(e.phase, a);
  });
  return () => new Map([...ahead].map(([k, v]) => [k, v.most]));
}

describe('the ring sends ahead by a window, not a whole chunk', () => {
  for (const [size, algorithm, groups] of [
    [2, 'ring', undefined],
    [3, 'ring', undefined],
    [4, 'hierarchical', 2],
  ] as const) {
    it(`${size} ranks, ${algorithm}: at most SEND_AHEAD segments ahead on the first step; exact sums`, async () => {
      const comms = createMemoryRing(size);
      const tallies = comms.map(mostAhead);
      // 16-float segments, 100 to every chunk of every ring (all chunks alike), far more than the window.
      const count = 16 * 100 * size;
      const out = await Promise.all(
        comms.map((c, r) =>
          allreduce(
            c,
            Int32Array.from({ length: count }, (_, i) => r + i),
            { algorithm, groups, segmentBytes: 64 },
          ),
        ),
      );
      for (const o of out)
        expect([o[0], o[count - 1]]).toEqual([(size * (size - 1)) / 2, (size * (size - 1)) / 2 + size * (count - 1)]);
      for (const tally of tallies) {
        const most = tally();
        expect([...most.keys()].sort()).toEqual(
          algorithm === 'ring' ? ['allgather', 'reduce-scatter'] : ['hierarchical'],
        );
        for (const m of most.values()) expect(m).toBe(SEND_AHEAD);
      }
      comms.forEach((c) => c.close());
    });
  }
});
