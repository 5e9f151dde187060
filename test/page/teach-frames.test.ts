import { describe, expect, it } from 'vitest';
import { allRanksAgree, buildFrames, chunkSpans, elementsSentPerRank } from '../../demo/src/teach/frames.ts';
import { textbookRingEvents } from './ring-events.ts';

function inputsFor(size: number, length: number): number[][] {
  return Array.from({ length: size }, (_, r) => Array.from({ length }, (_, i) => ((r * 7 + i * 3) % 9) + 1));
}
const sumOf = (inputs: number[][]) => inputs[0].map((_, i) => inputs.reduce((s, v) => s + v[i], 0));

describe('teaching frames from ring events', () => {
  for (const size of [2, 3, 4, 8]) {
    for (const withResult of [false, true]) {
      it(`N=${size}, ${withResult ? 'with' : 'without'} result arrays: 2(N-1) steps, every rank ends with the sum`, () => {
        const inputs = inputsFor(size, 2 * size + 1); // uneven chunks on purpose
        const { events } = textbookRingEvents(inputs, { withResult });
        const frames = buildFrames({ size, inputs, events });
        expect(frames).toHaveLength(1 + 2 * (size - 1));
        expect(frames[0].buffers).toEqual(inputs);
        expect(frames.filter((f) => f.kind === 'reduce-scatter').map((f) => f.step)).toEqual(
          Array.from({ length: size - 1 }, (_, i) => i + 1),
        );
        const last = frames[frames.length - 1];
        expect(last.kind).toBe('allgather');
        for (const b of last.buffers) expect(b).toEqual(sumOf(inputs));
        expect(allRanksAgree(last)).toBe(true);
        expect(allRanksAgree(frames[0])).toBe(false);
        // Each frame moves one chunk per rank, to its right-hand neighbour.
        for (const f of frames.slice(1)) {
          expect(f.transfers.map((t) => [t.from, t.to])).toEqual(
            Array.from({ length: size }, (_, r) => [r, (r + 1) % size]),
          );
        }
      });
    }
  }

  it('frames do not share buffers: stepping back shows the earlier numbers', () => {
    const inputs = inputsFor(3, 6);
    const frames = buildFrames({ size: 3, inputs, ...textbookRingEvents(inputs) });
    expect(frames[0].buffers).toEqual(inputs);
    expect(frames[1].buffers).not.toEqual(inputs);
    expect(frames[1].changed[1].size).toBeGreaterThan(0);
  });

  it('each rank sends 2(N-1)/N of the vector', () => {
    const size = 4;
    const inputs = inputsFor(size, 8);
    const rec = { size, inputs, ...textbookRingEvents(inputs) };
    expect(elementsSentPerRank(rec)).toEqual([12, 12, 12, 12]); // 2(N-1)/N * 8 = 12
    expect(chunkSpans(rec).map((s) => [s.offset, s.count])).toEqual([
      [0, 2],
      [2, 2],
      [4, 2],
      [6, 2],
    ]);
  });
});

describe('settled cells', () => {
  it('after reduce-scatter each rank holds one final chunk; after allgather every cell is final', () => {
    const size = 4;
    const inputs = inputsFor(size, 8);
    const frames = buildFrames({ size, inputs, ...textbookRingEvents(inputs) });
    const sum = sumOf(inputs);
    const endOfReduceScatter = frames[size - 1];
    expect(endOfReduceScatter.kind).toBe('reduce-scatter');
    for (let r = 0; r < size; r++) {
      expect(endOfReduceScatter.settled[r].size).toBe(2); // one chunk of 8/4 elements
      for (const i of endOfReduceScatter.settled[r]) expect(endOfReduceScatter.buffers[r][i]).toBe(sum[i]);
    }
    for (const f of frames.slice(0, size - 1)) for (const cells of f.settled) expect(cells.size).toBe(0);
    for (const cells of frames[frames.length - 1].settled) expect(cells.size).toBe(8);
  });
});
