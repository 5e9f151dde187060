import { describe, expect, it } from 'vitest';
import { EventBus } from '../../src/core/events.ts';
import { mergeTraces, TimelineRecorder } from '../../src/distributed/timeline.ts';

describe('TimelineRecorder', () => {
  it('turns begin/end pairs into complete events on the shared wall clock', () => {
    const bus = new EventBus();
    const rec = new TimelineRecorder(1_000); // timeOrigin 1 s after the epoch
    rec.attach(bus);
    bus.emit({ type: 'compute-begin', t: 5, rank: 1, step: 0 });
    bus.emit({ type: 'compute-end', t: 7.5, rank: 1, step: 0 });
    bus.emit({ type: 'phase-begin', t: 8, rank: 1, id: 3, phase: 'reduce-scatter' });
    bus.emit({ type: 'chunk-send', t: 8.5, rank: 1, id: 3, phase: 'reduce-scatter', step: 0, from: 1, to: 2, chunk: 1, offset: 10, count: 10, bytes: 40 });
    bus.emit({ type: 'phase-end', t: 9, rank: 1, id: 3, phase: 'reduce-scatter' });
    const events = rec.traceEvents().filter((e) => e.ph !== 'M');
    const compute = events.find((e) => e.name === 'compute');
    expect(compute).toMatchObject({ ph: 'X', pid: 1, ts: 1_005_000, dur: 2_500 });
    const rs = events.find((e) => e.name === 'reduce-scatter');
    expect(rs).toMatchObject({ ph: 'X', ts: 1_008_000, dur: 1_000 });
    const send = events.find((e) => e.ph === 'i');
    expect(send?.args).toMatchObject({ chunk: 1, bytes: 40 });
    expect(send?.name).toContain('1→2');
  });

  it('ignores an end without a begin instead of inventing a duration', () => {
    const rec = new TimelineRecorder(0);
    rec.record({ type: 'phase-end', t: 3, rank: 0, id: 1, phase: 'allgather' });
    expect(rec.traceEvents().filter((e) => e.ph !== 'M')).toHaveLength(0);
  });

  it('merges ranks into one JSON document with one set of names per rank', () => {
    const a = new TimelineRecorder(0);
    const b = new TimelineRecorder(0);
    a.record({ type: 'compute-begin', t: 1, rank: 0, step: 0 });
    a.record({ type: 'compute-end', t: 2, rank: 0, step: 0 });
    b.record({ type: 'compute-begin', t: 0.5, rank: 1, step: 0 });
    b.record({ type: 'compute-end', t: 3, rank: 1, step: 0 });
    const doc = mergeTraces([a.traceEvents(), b.traceEvents(), a.traceEvents()]);
    const names = doc.traceEvents.filter((e) => e.name === 'process_name').map((e) => e.args?.name);
    expect(names).toEqual(['rank 0', 'rank 1']);
    const computes = doc.traceEvents.filter((e) => e.name === 'compute');
    expect(computes.map((e) => e.pid)).toEqual([1, 0, 0]);
    expect(JSON.parse(JSON.stringify(doc)).traceEvents.length).toBe(doc.traceEvents.length);
  });

  it("counts each step's collectives, those it waited for one after another, and negotiations on a 'rounds' counter track", () => {
    const rec = new TimelineRecorder(0);
    const step = (t: number, negotiated: boolean) => {
      rec.record({ type: 'collective-begin', t, rank: 0, size: 2, id: t, name: 'gradients', kind: 'allreduce', dtype: 'float32', count: 4, bytes: 16 });
      if (negotiated) rec.record({ type: 'phase-begin', t, rank: 0, id: t, phase: 'negotiate' });
      // The step checks' allgather, begun while the allreduce runs: no round of its own.
      rec.record({ type: 'collective-begin', t, rank: 0, size: 2, id: t + 100, name: 'gradient-sketches', kind: 'allgather', dtype: 'float32', count: 2, bytes: 8 });
      rec.record({ type: 'collective-end', t, rank: 0, id: t + 100, name: 'gradient-sketches', ok: true });
      rec.record({ type: 'collective-end', t, rank: 0, id: t, name: 'gradients', ok: true });
      rec.record({ type: 'train-step', t: t + 0.5, rank: 0, size: 2, step: t, epoch: 0, loss: 1, samples: 8, samplesPerS: 1, bytesSent: 0 });
    };
    step(1, true);
    step(2, false);
    const counts = rec.traceEvents().filter((e) => e.ph === 'C').map((e) => e.args);
    expect(counts).toEqual([{ collectives: 2, sequential: 1, negotiations: 1 }, { collectives: 2, sequential: 1, negotiations: 0 }]);
  });
});
