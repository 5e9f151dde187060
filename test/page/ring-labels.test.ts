/**
 * The live ring draws one chunk per link: a step of a model with many
 * gradient buckets has a dozen chunks on each link at once, and their labels
 * piled up on one edge (15 `AG #1`/`RS #0` on a ring of 2). The latest one is
 * drawn, saying how many more are on its way.
 */
import { describe, expect, it } from 'vitest';
import type { ChunkInFlight } from '../../demo/src/ring/model.ts';
import { latestPerLink, toDrawing } from '../../demo/src/ring/live.ts';

const chunk = (
  from: number,
  to: number,
  t: number,
  phase: 'reduce-scatter' | 'allgather',
  n: number,
): ChunkInFlight => ({ key: `${from}-${to}-${t}`, from, to, chunk: n, phase, t, bytes: 1000 });

describe('the live ring on a busy link', () => {
  it('labels each link once, with its latest chunk and how many more it carries', () => {
    const inFlight = [
      ...Array.from({ length: 15 }, (_, i) => chunk(0, 1, i, i < 8 ? 'reduce-scatter' : 'allgather', i % 2)),
      ...Array.from({ length: 3 }, (_, i) => chunk(1, 0, 20 + i, 'reduce-scatter', 0)),
    ];
    expect(latestPerLink(inFlight).map((l) => [l.chunk.from, l.chunk.to, l.chunk.t, l.others])).toEqual([
      [0, 1, 14, 14],
      [1, 0, 22, 2],
    ]);
    const drawing = toDrawing(
      { size: 2, self: 0, peers: [{ rank: 0 }, { rank: 1 }], links: [], inFlight } as never,
      30,
    );
    expect(drawing.chunks.map((c) => [c.from, c.to, c.label])).toEqual([
      [0, 1, 'AG #0 +14'],
      [1, 0, 'RS #0 +2'],
    ]);
  });

  it('on a ring of 8 with a dozen chunks on every link, draws 8 labels, one on each link', () => {
    const size = 8;
    // Each rank's link to its right-hand neighbour carries 12 chunks; the last sent is chunk (rank + 11) % 8.
    const inFlight = Array.from({ length: size }, (_, r) =>
      Array.from({ length: 12 }, (_, i) => chunk(r, (r + 1) % size, 100 * r + i, 'reduce-scatter', (r + i) % size)),
    ).flat();
    const peers = Array.from({ length: size }, (_, rank) => ({ rank }));
    const drawing = toDrawing({ size, self: 0, peers, links: [], inFlight } as never, 30);
    expect(drawing.chunks.map((c) => [c.from, c.to, c.label])).toEqual(
      Array.from({ length: size }, (_, r) => [r, (r + 1) % size, `RS #${(r + 11) % size} +11`]),
    );
  });
});
