import { describe, expect, it } from 'vitest';
import { formatRate, IN_FLIGHT_MAX_MS, RingModel, THROUGHPUT_WINDOW_MS } from '../../demo/src/ring/model.ts';
import { textbookRingEvents } from './ring-events.ts';

describe('the live ring model folds RingEvents', () => {
  it('membership sets size, self and runtimes', () => {
    const m = new RingModel();
    m.apply({
      type: 'membership',
      t: 0,
      rank: 2,
      size: 3,
      epoch: 1,
      peers: [
        { rank: 0, id: 'a', runtime: 'deno' },
        { rank: 1, id: 'b', runtime: 'browser' },
        { rank: 2, id: 'c', runtime: 'browser' },
      ],
    });
    const s = m.snapshot(0);
    expect(s.size).toBe(3);
    expect(s.self).toBe(2);
    expect(s.peers.map((p) => p.runtime)).toEqual(['deno', 'browser', 'browser']);
    expect(s.links.map((l) => [l.from, l.to])).toEqual([
      [0, 1],
      [1, 2],
      [2, 0],
    ]);
  });

  it('sends put chunks in flight, receives take them off, throughput counts bytes in the window', () => {
    const m = new RingModel();
    const { events } = textbookRingEvents([
      [1, 2, 3, 4],
      [5, 6, 7, 8],
    ]);
    const sends = events.filter((e) => e.type === 'chunk-send');
    for (const e of events.filter((x) => x.type === 'collective-begin')) m.apply(e);
    m.apply(sends[0]);
    m.apply(sends[1]);
    let s = m.snapshot(sends[0].t);
    expect(s.inFlight).toHaveLength(2);
    expect(s.inFlight.every((c) => c.phase === 'reduce-scatter')).toBe(true);
    // Each send carries 2 int32 = 8 bytes; per-link rate is bytes over the window.
    expect(s.links[0].bytesPerS).toBeCloseTo((8 * 1000) / THROUGHPUT_WINDOW_MS);
    expect(s.links[0].phase).toBe('reduce-scatter');
    for (const e of events.filter((x) => x.type === 'chunk-recv' && x.phase === 'reduce-scatter')) m.apply(e);
    s = m.snapshot(sends[0].t);
    expect(s.inFlight).toHaveLength(0);
    // Long after, the link is idle again.
    s = m.snapshot(sends[0].t + THROUGHPUT_WINDOW_MS + 1);
    expect(s.links[0].bytesPerS).toBe(0);
    expect(s.links[0].phase).toBeUndefined();
  });

  it('a chunk whose arrival is never seen leaves the picture', () => {
    const m = new RingModel();
    m.apply({
      type: 'chunk-send',
      t: 10,
      rank: 0,
      id: 1,
      phase: 'allgather',
      step: 0,
      from: 0,
      to: 1,
      chunk: 1,
      offset: 4,
      count: 4,
      bytes: 16,
    });
    expect(m.snapshot(10).inFlight).toHaveLength(1);
    expect(m.snapshot(10 + IN_FLIGHT_MAX_MS + 1).inFlight).toHaveLength(0);
  });

  it('stall marks the awaited ranks until they are heard from; peer-lost marks a departed peer', () => {
    const m = new RingModel();
    m.apply({
      type: 'collective-begin',
      t: 0,
      rank: 0,
      size: 3,
      id: 1,
      name: 'g',
      kind: 'allreduce',
      dtype: 'float32',
      count: 3,
      bytes: 12,
    });
    m.apply({ type: 'stall', t: 1, rank: 0, id: 1, name: 'g', waitingFor: [2], waitedMs: 3000 });
    expect(m.snapshot(1).peers.map((p) => p.stalledMs)).toEqual([undefined, undefined, 3000]);
    m.apply({
      type: 'chunk-recv',
      t: 2,
      rank: 0,
      id: 1,
      phase: 'reduce-scatter',
      step: 0,
      from: 2,
      to: 0,
      chunk: 2,
      offset: 2,
      count: 1,
      bytes: 4,
    });
    expect(m.snapshot(2).peers[2].stalledMs).toBeUndefined();
    m.apply({ type: 'peer-lost', t: 3, rank: 0, peer: 1, reason: 'tab closed' });
    expect(m.snapshot(3).peers[1].lost).toBe('tab closed');
  });

  it('formats rates', () => {
    expect(formatRate(0)).toBe('—');
    expect(formatRate(850)).toBe('850 B/s');
    expect(formatRate(12_300)).toBe('12 kB/s');
    expect(formatRate(23_400_000)).toBe('23.4 MB/s');
  });
});

describe('what the live ring draws', () => {
  it('marks stalled and departed peers, labels busy links with their rate, and moves chunks along', async () => {
    const { toDrawing } = await import('../../demo/src/ring/live.ts');
    const m = new RingModel();
    m.apply({
      type: 'membership',
      t: 0,
      rank: 0,
      size: 3,
      epoch: 2,
      peers: [
        { rank: 0, id: 'a', runtime: 'browser' },
        { rank: 1, id: 'b', runtime: 'deno' },
        { rank: 2, id: 'c', runtime: 'browser' },
      ],
    });
    m.apply({
      type: 'chunk-send',
      t: 100,
      rank: 0,
      id: 3,
      phase: 'allgather',
      step: 0,
      from: 0,
      to: 1,
      chunk: 0,
      offset: 0,
      count: 1000,
      bytes: 4000,
    });
    m.apply({ type: 'stall', t: 150, rank: 0, id: 3, name: 'grads', waitingFor: [2], waitedMs: 5000 });
    m.apply({ type: 'peer-lost', t: 160, rank: 0, peer: 1, reason: 'heartbeat' });
    const d = toDrawing(m.snapshot(100 + IN_FLIGHT_MAX_MS / 2), 100 + IN_FLIGHT_MAX_MS / 2);
    expect(d.self).toBe(0);
    expect(d.peers.map((p) => [p.sub, !!p.stalled, !!p.lost])).toEqual([
      ['browser', false, false],
      ['deno', false, true],
      ['browser', true, false],
    ]);
    expect(d.links[0]).toMatchObject({
      from: 0,
      to: 1,
      phase: 'allgather',
      label: formatRate((4000 * 1000) / THROUGHPUT_WINDOW_MS),
    });
    expect(d.links[1].label).toBeUndefined();
    expect(d.chunks).toHaveLength(1);
    expect(d.chunks[0].progress).toBeCloseTo(0.5);
    expect(d.description).toBe('3 peers in the ring; stalled: rank 2; left: rank 1');
    expect(d.chunks[0].label).toBe('AG #0');
    m.apply({ type: 'phase-begin', t: 170, rank: 0, id: 3, phase: 'allgather' });
    expect(toDrawing(m.snapshot(170), 170).description).toContain('rank 0 in allgather');
  });

  it('says it is waiting for the job, not that there is nothing to watch, before the first report', async () => {
    const { toDrawing, WAITING_FOR_JOB } = await import('../../demo/src/ring/live.ts');
    const empty = new RingModel().snapshot(0);
    expect(toDrawing(empty, 0, WAITING_FOR_JOB)).toMatchObject({
      size: 0,
      empty: WAITING_FOR_JOB,
      description: WAITING_FOR_JOB,
    });
    expect(toDrawing(empty, 0).description).toBe('0 peers in the ring');
  });
});

describe('links this tab only receives on', () => {
  it('count the bytes that arrive, once, and not when the sender is seen too', () => {
    const m = new RingModel();
    // This tab is rank 1 of 3: it sees its own sends (1->2) and what arrives from rank 0.
    m.apply({
      type: 'chunk-send',
      t: 0,
      rank: 1,
      id: 1,
      phase: 'reduce-scatter',
      step: 0,
      from: 1,
      to: 2,
      chunk: 0,
      offset: 0,
      count: 10,
      bytes: 40,
    });
    m.apply({
      type: 'chunk-recv',
      t: 1,
      rank: 1,
      id: 1,
      phase: 'reduce-scatter',
      step: 0,
      from: 0,
      to: 1,
      chunk: 2,
      offset: 20,
      count: 10,
      bytes: 40,
    });
    let s = m.snapshot(2);
    expect(s.links.map((l) => l.bytesPerS > 0)).toEqual([true, true, false]);
    expect(s.links[0].phase).toBe('reduce-scatter');
    // Where the sender's own event is seen (teaching mode), its receive adds nothing more.
    m.apply({
      type: 'chunk-recv',
      t: 2,
      rank: 2,
      id: 1,
      phase: 'reduce-scatter',
      step: 0,
      from: 1,
      to: 2,
      chunk: 0,
      offset: 0,
      count: 10,
      bytes: 40,
    });
    s = m.snapshot(2);
    expect(s.links[1].bytesPerS).toBeCloseTo((40 * 1000) / THROUGHPUT_WINDOW_MS);
  });
});

describe('links between other machines', () => {
  it('get their rate from the bytes each rank reports sending, and forget them in a new epoch', () => {
    const m = new RingModel();
    const peers = [0, 1, 2].map((rank) => ({ rank, id: `p${rank}` }));
    m.apply({ type: 'membership', t: 0, rank: -1, size: 3, epoch: 1, peers });
    const step = (t: number, rank: number, bytesSent: number) =>
      m.apply({
        type: 'train-step',
        t,
        rank,
        size: 3,
        step: 1,
        epoch: 0,
        loss: 1,
        samples: 32,
        samplesPerS: 10,
        bytesSent,
      });
    step(0, 1, 1_000_000);
    step(1000, 1, 1_400_000);
    let s = m.snapshot(1000);
    expect(s.links.map((l) => l.bytesPerS)).toEqual([0, (400_000 * 1000) / THROUGHPUT_WINDOW_MS, 0]);
    expect(s.links[1].phase).toBeUndefined();
    m.apply({ type: 'membership', t: 1500, rank: -1, size: 2, epoch: 2, peers: peers.slice(0, 2) });
    step(1600, 1, 50);
    s = m.snapshot(1600 + THROUGHPUT_WINDOW_MS + 1);
    expect(s.links.every((l) => l.bytesPerS === 0)).toBe(true);
  });
});

describe('a link seen both ways', () => {
  it('counts arrivals from the left neighbour once, not again from its reported bytes', () => {
    const m = new RingModel();
    m.apply({
      type: 'membership',
      t: 0,
      rank: 0,
      size: 3,
      epoch: 1,
      peers: [0, 1, 2].map((rank) => ({ rank, id: `p${rank}` })),
    });
    m.apply({
      type: 'chunk-recv',
      t: 10,
      rank: 0,
      id: 1,
      phase: 'allgather',
      step: 0,
      from: 2,
      to: 0,
      chunk: 1,
      offset: 0,
      count: 100,
      bytes: 400,
    });
    m.apply({
      type: 'train-step',
      t: 20,
      rank: 2,
      size: 3,
      step: 1,
      epoch: 0,
      loss: 1,
      samples: 32,
      samplesPerS: 10,
      bytesSent: 0,
    });
    m.apply({
      type: 'train-step',
      t: 30,
      rank: 2,
      size: 3,
      step: 2,
      epoch: 0,
      loss: 1,
      samples: 32,
      samplesPerS: 10,
      bytesSent: 1_000_000,
    });
    expect(m.snapshot(30).links[2].bytesPerS).toBeCloseTo((400 * 1000) / THROUGHPUT_WINDOW_MS);
  });
});
