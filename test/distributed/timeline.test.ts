import { describe, expect, it } from 'vitest';
import { EventBus } from '../../src/core/events.ts';
import { mergeTraces, RoundCounter, TimelineRecorder } from '../../src/distributed/observe/timeline.ts';

describe('TimelineRecorder', () => {
  it('turns begin/end pairs into complete events on the shared wall clock', () => {
    const bus = new EventBus();
    const rec = new TimelineRecorder(1_000); // timeOrigin 1 s after the epoch
    rec.attach(bus);
    bus.emit({ type: 'compute-begin', t: 5, rank: 1, step: 0 });
    bus.emit({ type: 'compute-end', t: 7.5, rank: 1, step: 0 });
    bus.emit({ type: 'phase-begin', t: 8, rank: 1, id: 3, phase: 'reduce-scatter' });
    bus.emit({
      type: 'chunk-send',
      t: 8.5,
      rank: 1,
      id: 3,
      phase: 'reduce-scatter',
      step: 0,
      from: 1,
      to: 2,
      chunk: 1,
      offset: 10,
      count: 10,
      bytes: 40,
    });
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

  it("draws an admission probe as a span under which the rank's steps go on, with a counter of the probes open", () => {
    const rec = new TimelineRecorder(0);
    const probe = { type: 'admission-probe', rank: 0, side: 0, peer: 'ghost-1' } as const;
    rec.record({ ...probe, t: 1, probe: 7, phase: 'begin' });
    rec.record({ ...probe, t: 2, probe: 8, phase: 'begin' });
    rec.record({
      type: 'train-step',
      t: 3,
      rank: 0,
      size: 2,
      step: 0,
      epoch: 0,
      loss: 1,
      samples: 8,
      samplesPerS: 1,
      bytesSent: 0,
    });
    rec.record({ ...probe, t: 6, probe: 7, phase: 'end', ok: false, reason: 'no echo within 5000 ms' });
    // A candidate's own probe (rank -1) is no rank's: not drawn.
    rec.record({ ...probe, t: 6, rank: -1, probe: 9, phase: 'begin' });
    const events = rec.traceEvents().filter((e) => e.ph !== 'M');
    const span = events.find((e) => e.name === 'admission probe with ghost-1');
    expect(span).toMatchObject({ ph: 'X', pid: 0, ts: 1_000, dur: 5_000, args: { probe: 7, ok: false } });
    const step = events.find((e) => e.name === 'rounds')!;
    expect(step.ts).toBeGreaterThan(span!.ts);
    expect(step.ts).toBeLessThan(span!.ts + span!.dur!);
    expect(events.filter((e) => e.name === 'admission probes').map((e) => e.args?.open)).toEqual([1, 2, 1]);
    expect(events.every((e) => e.pid === 0)).toBe(true);
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
      rec.record({
        type: 'collective-begin',
        t,
        rank: 0,
        size: 2,
        id: t,
        name: 'gradients',
        kind: 'allreduce',
        dtype: 'float32',
        count: 4,
        bytes: 16,
      });
      if (negotiated) rec.record({ type: 'phase-begin', t, rank: 0, id: t, phase: 'negotiate' });
      // The step checks' allgather, begun while the allreduce runs: no round of its own.
      rec.record({
        type: 'collective-begin',
        t,
        rank: 0,
        size: 2,
        id: t + 100,
        name: 'gradient-sketches',
        kind: 'allgather',
        dtype: 'float32',
        count: 2,
        bytes: 8,
      });
      rec.record({ type: 'collective-end', t, rank: 0, id: t + 100, name: 'gradient-sketches', ok: true });
      rec.record({ type: 'collective-end', t, rank: 0, id: t, name: 'gradients', ok: true });
      rec.record({
        type: 'train-step',
        t: t + 0.5,
        rank: 0,
        size: 2,
        step: t,
        epoch: 0,
        loss: 1,
        samples: 8,
        samplesPerS: 1,
        bytesSent: 0,
      });
    };
    step(1, true);
    step(2, false);
    const counts = rec
      .traceEvents()
      .filter((e) => e.ph === 'C')
      .map((e) => e.args);
    expect(counts).toEqual([
      { collectives: 2, sequential: 1, negotiations: 1, buckets: 0 },
      { collectives: 2, sequential: 1, negotiations: 0, buckets: 0 },
    ]);
  });

  it('draws a collective that begins while another runs, with its phases, on a track of its own, so spans on a track nest', () => {
    const rec = new TimelineRecorder(0);
    const begin = (t: number, id: number, name: string) =>
      rec.record({
        type: 'collective-begin',
        t,
        rank: 0,
        size: 2,
        id,
        name,
        kind: 'allreduce',
        dtype: 'float32',
        count: 4,
        bytes: 16,
      });
    const phase = (t: number, id: number, end: boolean) =>
      rec.record({ type: end ? 'phase-end' : 'phase-begin', t, rank: 0, id, phase: 'reduce-scatter' });
    const end = (t: number, id: number, name: string) =>
      rec.record({ type: 'collective-end', t, rank: 0, id, name, ok: true });
    begin(1, 1, 'bucket 1/2');
    phase(1, 1, false);
    begin(2, 2, 'bucket 2/2');
    phase(2, 2, false);
    phase(3, 1, true);
    end(3, 1, 'bucket 1/2');
    phase(4, 2, true);
    end(4, 2, 'bucket 2/2');
    // Lane 0 is free again: the next collective goes back to the usual track.
    begin(5, 3, 'metrics');
    end(6, 3, 'metrics');
    const spans = rec.traceEvents().filter((e) => e.ph === 'X');
    const tidOf = (name: string, id?: number) =>
      spans.find((e) => e.name === name && (id === undefined || e.args?.id === id))!.tid;
    expect(tidOf('collective bucket 1/2')).toBe(3);
    expect(tidOf('reduce-scatter', 1)).toBe(3);
    expect(tidOf('collective bucket 2/2')).toBe(101);
    expect(tidOf('reduce-scatter', 2)).toBe(101);
    expect(tidOf('collective metrics')).toBe(3);
    expect(rec.traceEvents().find((e) => e.ph === 'M' && e.tid === 101)?.args).toEqual({
      name: 'collectives beside (1)',
    });
  });

  it("counts a step's gradient buckets as one round, even when one begins after the bucket before it ended", () => {
    const rec = new TimelineRecorder(0);
    const bucket = (t: number, i: number, n: number) => {
      rec.record({ type: 'gpu-wait', t, rank: 0, what: `gradients bucket ${i}/${n}`, ms: 0.5, bucket: [i, n] });
      rec.record({
        type: 'collective-begin',
        t,
        rank: 0,
        size: 2,
        id: t,
        name: `gradients bucket ${i}/${n}`,
        kind: 'allreduce',
        dtype: 'float32',
        count: 4,
        bytes: 16,
      });
    };
    bucket(1, 1, 3);
    rec.record({ type: 'collective-end', t: 1.5, rank: 0, id: 1, name: 'gradients bucket 1/3', ok: true });
    // Bucket 2 is read back after bucket 1's sum is done: the ring waited on backward.
    bucket(2, 2, 3);
    bucket(3, 3, 3);
    // The step checks begin beside the last bucket.
    rec.record({
      type: 'collective-begin',
      t: 3,
      rank: 0,
      size: 2,
      id: 100,
      name: 'gradient-sketches',
      kind: 'allgather',
      dtype: 'float32',
      count: 2,
      bytes: 8,
    });
    for (const id of [2, 3, 100]) rec.record({ type: 'collective-end', t: 4, rank: 0, id, name: 'x', ok: true });
    rec.record({
      type: 'train-step',
      t: 5,
      rank: 0,
      size: 2,
      step: 0,
      epoch: 0,
      loss: 1,
      samples: 8,
      samplesPerS: 1,
      bytesSent: 0,
    });
    // A collective that begins on its own after the step's gradients is a round of its own again.
    rec.record({
      type: 'collective-begin',
      t: 6,
      rank: 0,
      size: 2,
      id: 200,
      name: 'metrics',
      kind: 'allreduce',
      dtype: 'float32',
      count: 2,
      bytes: 8,
    });
    rec.record({ type: 'collective-end', t: 7, rank: 0, id: 200, name: 'metrics', ok: true });
    rec.record({
      type: 'train-step',
      t: 8,
      rank: 0,
      size: 2,
      step: 1,
      epoch: 0,
      loss: 1,
      samples: 8,
      samplesPerS: 1,
      bytesSent: 0,
    });
    const counts = rec
      .traceEvents()
      .filter((e) => e.ph === 'C')
      .map((e) => e.args);
    expect(counts).toEqual([
      { collectives: 4, sequential: 1, negotiations: 0, buckets: 3 },
      { collectives: 1, sequential: 1, negotiations: 0, buckets: 0 },
    ]);
    // A rank that reads every bucket before reducing any (a caller's transform) waits for one round too.
    const whole = new TimelineRecorder(0);
    for (const i of [1, 2])
      whole.record({ type: 'gpu-wait', t: i, rank: 0, what: `gradients bucket ${i}/2`, ms: 0.5, bucket: [i, 2] });
    for (const i of [1, 2])
      whole.record({
        type: 'collective-begin',
        t: 3,
        rank: 0,
        size: 2,
        id: i,
        name: `gradients bucket ${i}/2`,
        kind: 'allreduce',
        dtype: 'float32',
        count: 4,
        bytes: 16,
      });
    whole.record({
      type: 'train-step',
      t: 5,
      rank: 0,
      size: 2,
      step: 0,
      epoch: 0,
      loss: 1,
      samples: 8,
      samplesPerS: 1,
      bytesSent: 0,
    });
    expect(
      whole
        .traceEvents()
        .filter((e) => e.ph === 'C')
        .map((e) => e.args),
    ).toEqual([{ collectives: 2, sequential: 1, negotiations: 0, buckets: 2 }]);
    const waits = rec.traceEvents().filter((e) => e.name === 'gpu-wait');
    expect(waits.map((e) => e.args)).toEqual(
      [1, 2, 3].map((i) => ({ what: `gradients bucket ${i}/3`, bucket: [i, 3] })),
    );
  });
});

describe('RoundCounter', () => {
  const begin = (id: number, name: string) =>
    ({
      type: 'collective-begin',
      t: id,
      rank: 0,
      size: 2,
      id,
      name,
      kind: 'allreduce',
      dtype: 'float32',
      count: 1,
      bytes: 4,
    }) as const;
  const end = (id: number, name: string) => ({ type: 'collective-end', t: id, rank: 0, id, name, ok: true }) as const;

  it('counts no collective run while set aside (an evaluation between steps), and counts the steps’ own', () => {
    const counter = new RoundCounter();
    for (let step = 0; step < 3; step++) {
      counter.record(begin(10 * step, 'gradients'));
      counter.record(end(10 * step, 'gradients'));
      counter.record(begin(10 * step + 1, 'verify-verdicts'));
      counter.record(end(10 * step + 1, 'verify-verdicts'));
      counter.setAside = step === 1;
      counter.record(begin(10 * step + 2, 'metrics'));
      counter.record(end(10 * step + 2, 'metrics'));
      counter.setAside = false;
      counter.step();
    }
    // Steps 1 and 2 are the steady ones: step 1's evaluation is not counted, step 2's metrics are (not set aside).
    expect(counter.perStep()).toEqual({
      collectives: 2.5,
      sequential: 2.5,
      negotiations: 0,
      byName: { gradients: 1, 'verify-verdicts': 1, metrics: 0.5 },
      buckets: 0,
      exposedMs: null,
    });
  });
});
