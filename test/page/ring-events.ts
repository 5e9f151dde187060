/**
 * Test-only: the RingEvents a textbook ring-allreduce (sum) emits, built by
 * hand so that the page's renderers can be tested on events whose every number
 * the test knows. The page itself replays events from the real collective.
 */
import type { RingEvent } from '../../src/core/events.ts';

export function chunkBounds(length: number, size: number, chunk: number): { offset: number; count: number } {
  const base = Math.floor(length / size);
  const extra = length % size;
  const offset = chunk * base + Math.min(chunk, extra);
  return { offset, count: base + (chunk < extra ? 1 : 0) };
}

/** Events of a ring allreduce of `inputs` (one vector per rank), and the vectors each rank ends with. */
export function textbookRingEvents(
  inputs: number[][],
  opts: { withResult?: boolean; id?: number } = {},
): { events: RingEvent[]; outputs: number[][] } {
  const size = inputs.length;
  const length = inputs[0]?.length ?? 0;
  const id = opts.id ?? 1;
  const bufs = inputs.map((v) => [...v]);
  const events: RingEvent[] = [];
  let t = 0;
  for (let r = 0; r < size; r++) {
    events.push({
      type: 'collective-begin',
      t,
      rank: r,
      size,
      id,
      name: 'teach',
      kind: 'allreduce',
      op: 'sum',
      dtype: 'int32',
      count: length,
      bytes: length * 4,
    });
  }
  for (const phase of ['reduce-scatter', 'allgather'] as const) {
    for (let step = 0; step < size - 1; step++) {
      t += 1;
      // Every rank sends at once; take the values before anyone applies this step.
      const moves = [];
      for (let r = 0; r < size; r++) {
        const chunk = phase === 'reduce-scatter' ? (r - step + size) % size : (r + 1 - step + size) % size;
        const { offset, count } = chunkBounds(length, size, chunk);
        const to = (r + 1) % size;
        const values = bufs[r].slice(offset, offset + count);
        moves.push({ from: r, to, chunk, offset, count, values });
        events.push({
          type: 'chunk-send',
          t,
          rank: r,
          id,
          phase,
          step,
          from: r,
          to,
          chunk,
          offset,
          count,
          bytes: count * 4,
          values,
        });
      }
      for (const m of moves) {
        for (let i = 0; i < m.count; i++) {
          bufs[m.to][m.offset + i] = phase === 'reduce-scatter' ? bufs[m.to][m.offset + i] + m.values[i] : m.values[i];
        }
        const result = opts.withResult ? bufs[m.to].slice(m.offset, m.offset + m.count) : undefined;
        events.push({ type: 'chunk-recv', t: t + 0.5, rank: m.to, id, phase, step, ...m, bytes: m.count * 4, result });
      }
    }
  }
  for (let r = 0; r < size; r++)
    events.push({ type: 'collective-end', t: t + 1, rank: r, id, name: 'teach', ok: true });
  return { events, outputs: bufs };
}
