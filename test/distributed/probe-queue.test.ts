/**
 * ProbeQueue (src/distributed/session/probe-queue.ts): a member answers admission probes beside
 * training, at most maxOpen at once; the rest wait with what is left of their deadline, and one
 * whose deadline passed while it waited is given up without a link. Probes here are answered by
 * hand (each answer is a promise the test settles), so the order of events is the test's own.
 */
import { describe, expect, it } from 'vitest';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import type { ProbeOutcome } from '../../src/distributed/session/admission-probe.ts';
import { ProbeQueue } from '../../src/distributed/session/probe-queue.ts';
import type { ProbeMsg } from '../../src/signaling/protocol.ts';

function probe(id: number): ProbeMsg {
  return { type: 'probe', probe: id, side: 0, peer: { peerId: `p${id}`, runtime: 'node', name: `ghost-${id}` } };
}

function queue(maxOpen: number) {
  const answering: { p: ProbeMsg; deadlineMs: number; settle: (o: ProbeOutcome) => void }[] = [];
  const skipped: number[] = [];
  const events: Extract<RingEvent, { type: 'admission-probe' }>[] = [];
  const bus = new EventBus();
  bus.on((e) => void (e.type === 'admission-probe' && events.push(e)));
  const q = new ProbeQueue({
    answer: (p, deadlineMs) => new Promise((settle) => answering.push({ p, deadlineMs, settle })),
    skip: (p) => skipped.push(p.probe),
    events: bus,
    rank: () => 0,
    maxOpen,
  });
  return { q, answering, skipped, events };
}

/** Lets the queue's `then` after a settled answer run. */
const settled = () => new Promise((r) => setTimeout(r, 0));

describe('ProbeQueue', () => {
  it('opens at most maxOpen probes and starts a waiting one when one ends, with what is left of its deadline', async () => {
    const { q, answering, events } = queue(2);
    for (const id of [1, 2, 3]) q.add(probe(id), 60_000);
    expect(answering.map((a) => a.p.probe)).toEqual([1, 2]);
    expect(q.opened).toBe(2);
    answering[0].settle({ ok: false, reason: 'no echo within 60000 ms' });
    await settled();
    expect(answering.map((a) => a.p.probe)).toEqual([1, 2, 3]);
    expect(q.opened).toBe(2);
    expect(answering[2].deadlineMs).toBeLessThanOrEqual(60_000);
    expect(answering[2].deadlineMs).toBeGreaterThan(50_000);
    answering[1].settle({ ok: true });
    answering[2].settle({ ok: true });
    await settled();
    expect(q.opened).toBe(0);
    expect(events.map((e) => `${e.phase} ${e.probe}${e.ok === undefined ? '' : ` ${e.ok}`}`)).toEqual([
      'begin 1',
      'begin 2',
      'end 1 false',
      'begin 3',
      'end 2 true',
      'end 3 true',
    ]);
    expect(events[2]).toMatchObject({ peer: 'ghost-1', side: 0, rank: 0, reason: 'no echo within 60000 ms' });
  });

  it('gives up a probe whose deadline passed while it waited, without opening its link', async () => {
    const { q, answering, skipped, events } = queue(1);
    q.add(probe(1), 60_000);
    q.add(probe(2), 0);
    q.add(probe(3), 60_000);
    answering[0].settle({ ok: false, reason: 'no echo' });
    await settled();
    expect(skipped).toEqual([2]);
    expect(answering.map((a) => a.p.probe)).toEqual([1, 3]);
    expect(events.find((e) => e.probe === 2)).toMatchObject({ phase: 'end', ok: false });
    expect(events.filter((e) => e.probe === 2)).toHaveLength(1);
  });

  it('returns from add at once: the caller (the socket handler) never waits for a probe', () => {
    const { q, answering } = queue(4);
    // Nothing here is awaited: a probe that never settles leaves add() and the caller free.
    for (let id = 1; id <= 10; id++) q.add(probe(id), 60_000);
    expect(answering).toHaveLength(4);
    expect(q.opened).toBe(4);
  });
});
