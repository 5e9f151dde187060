/**
 * Exposed allreduce from a rank's recorded events (src/distributed/observe/exposed-wait.ts):
 * from the end of a step's last gradient read-back to the step's close, over every step but
 * the first, as `worker --json` reports it through the rank's RoundCounter.
 */
import { describe, expect, it } from 'vitest';
import type { RingEvent } from '../../src/core/events.ts';
import { ExposedWait } from '../../src/distributed/observe/exposed-wait.ts';
import { RoundCounter } from '../../src/distributed/observe/timeline.ts';

const readBack = (t: number, ms: number, bucket?: [number, number]): RingEvent => ({
  type: 'gpu-wait',
  t,
  rank: 0,
  what: bucket && bucket[1] > 1 ? `gradients bucket ${bucket[0]}/${bucket[1]}` : 'gradients',
  ms,
  ...(bucket ? { bucket } : {}),
});

const collective = (t: number, id: number, end: boolean): RingEvent =>
  end
    ? { type: 'collective-end', t, rank: 0, id, name: 'gradients', ok: true }
    : {
        type: 'collective-begin',
        t,
        rank: 0,
        size: 2,
        id,
        name: 'gradients',
        kind: 'allreduce',
        dtype: 'float32',
        count: 4,
        bytes: 16,
      };

describe('ExposedWait', () => {
  it("measures from the end of the step's gradient read-back to its close, leaving out the first step", () => {
    const w = new ExposedWait();
    // Step 0: plans and negotiations; its 70 ms are not the steady state.
    w.record(readBack(10, 20));
    expect(w.step(100)).toBe(70);
    expect(w.perStepMs()).toBeNull();
    // Step 1: read back from 110 to 125, the allreduce and the update until 160.
    w.record({ type: 'compute-begin', t: 101, rank: 0, step: 1 });
    w.record(readBack(110, 15));
    w.record(collective(126, 1, false));
    w.record(collective(150, 1, true));
    expect(w.step(160)).toBe(35);
    // Step 2: 15 ms exposed.
    w.record(readBack(200, 10));
    expect(w.step(225)).toBe(15);
    expect(w.perStepMs()).toBe(25);
  });

  it("counts from the last bucket's read-back: the buckets reduced while backward went on are hidden", () => {
    const w = new ExposedWait();
    w.step(0);
    // Bucket 1 is read at 12 and reduced beside bucket 2's backward; bucket 2 is in at 40.
    w.record(readBack(10, 2, [1, 2]));
    w.record(collective(12, 1, false));
    w.record(readBack(30, 10, [2, 2]));
    w.record(collective(38, 1, true));
    w.record(collective(41, 2, false));
    w.record(collective(49, 2, true));
    expect(w.step(52)).toBe(12);
    expect(w.perStepMs()).toBe(12);
  });

  it("leaves out the GPU's run of the update (Deno waits for its parts), not the ring's wait before it", () => {
    const w = new ExposedWait();
    w.step(0);
    w.record(readBack(10, 10));
    w.record(collective(20, 1, false));
    w.record(collective(32, 1, true));
    // The sum is written back and the update recorded by 35; the GPU runs it until 235.
    w.record({ type: 'gpu-wait', t: 35, rank: 0, what: 'update', ms: 200 });
    expect(w.step(236)).toBe(16);
    // A wait that began before the gradients were in is compute's (an overflow's flag, read before them).
    w.record({ type: 'gpu-wait', t: 240, rank: 0, what: 'overflow', ms: 5 });
    w.record(readBack(250, 10));
    expect(w.step(270)).toBe(10);
    expect(w.perStepMs()).toBe(13);
  });

  it('counts no step that read no gradients back, and no read-back of anything else', () => {
    const w = new ExposedWait();
    w.step(0);
    // An overflow's skipped step, or local SGD's: the weights' read for a checkpoint is no gradient.
    w.record({ type: 'gpu-wait', t: 5, rank: 0, what: 'weights', ms: 3 });
    expect(w.step(20)).toBeNull();
    expect(w.perStepMs()).toBeNull();
    w.record(readBack(30, 5));
    expect(w.step(45)).toBe(10);
    expect(w.perStepMs()).toBe(10);
  });
});

describe("RoundCounter's exposed allreduce", () => {
  it('reports each step its exposed wait and the steady mean beside its rounds', () => {
    const rounds = new RoundCounter();
    const events: RingEvent[][] = [
      [readBack(0, 5), collective(5, 1, false), collective(30, 1, true)],
      [readBack(40, 5), collective(45, 2, false), collective(52, 2, true)],
      [readBack(60, 5), collective(65, 3, false), collective(80, 3, true)],
    ];
    const closes = [35, 55, 85];
    const perStep = events.map((step, i) => {
      for (const e of step) rounds.record(e);
      return rounds.step(closes[i]).exposedMs;
    });
    expect(perStep).toEqual([30, 10, 20]);
    expect(rounds.perStep()).toMatchObject({ collectives: 1, sequential: 1, exposedMs: 15 });
  });
});
