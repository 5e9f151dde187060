/**
 * The untrusted-peer rules on in-memory links (the named-and-ejected cases run on
 * real WebRTC processes in workers.test.ts): the contribution guard's robust
 * statistic, the per-peer budget on unconsumed messages, malformed frames, and
 * the chaos entry's --chaos forms (test/support/chaos/faults.ts).
 */
import { describe, expect, it } from 'vitest';
import { ring } from './memory-ring.ts';
import { UnconsumedBudget } from '../../src/comm/budget.ts';
import { readAbortNote } from '../../src/comm/abort-note.ts';
import { encodeFrames, FrameKind } from '../../src/comm/frame.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { checkContributions, contributionOutliers } from '../../src/distributed/robust/guard.ts';
import { misbehaveOnWire, parseFault, tamperGradients } from '../support/chaos/faults.ts';

const misbehaved = (events: RingEvent[]) =>
  events.filter((e) => e.type === 'peer-misbehaved') as Extract<RingEvent, { type: 'peer-misbehaved' }>[];

describe('contributionOutliers: the robust rule over per-rank gradient norms', () => {
  it('names a non-finite norm and a norm far above the median, and nothing in honest spreads', () => {
    expect(contributionOutliers([1, 1.3, NaN, 0.8])).toEqual([
      { rank: 2, reason: expect.stringContaining('not finite') },
    ]);
    expect(contributionOutliers([1, Infinity, 0.9]).map((o) => o.rank)).toEqual([1]);
    expect(contributionOutliers([0.5, 1e30, 0.7]).map((o) => o.rank)).toEqual([1]);
    expect(contributionOutliers([0.5, 0.6, 20 * 0.55, 0.4], { ratio: 10 }).map((o) => o.rank)).toEqual([2]);
    // The default ratio (1,000) leaves a 20× rank alone: honest small batches reach 50×.
    expect(contributionOutliers([0.5, 0.6, 20 * 0.55, 0.4])).toEqual([]);
    // Honest spreads: a few times apart, or everything tiny (the floor), never trip.
    expect(contributionOutliers([0.2, 1.5, 0.9, 3])).toEqual([]);
    expect(contributionOutliers([1e-12, 3e-9, 0])).toEqual([]);
  });

  it('blames no one when most ranks are non-finite (the run diverged) or when two ranks disagree', () => {
    expect(contributionOutliers([NaN, NaN, 1])).toEqual([]);
    expect(contributionOutliers([NaN, Infinity])).toEqual([]);
    // Two finite ranks: no telling which is wrong.
    expect(contributionOutliers([1, 1e30])).toEqual([]);
  });

  it('refuses nonsense settings', () => {
    expect(() => contributionOutliers([1, 2, 3], { ratio: 1 })).toThrow(/ratio must be > 1/);
  });
});

describe('checkContributions over a ring of memory links', () => {
  it('fails the step on every rank alike, naming the offender, before anything is summed', async () => {
    const { comms, seen } = ring(4);
    const grads = comms.map((_, r) => new Float32Array(100).fill(0.01 * (r + 1)));
    tamperGradients(parseFault('scale:-20'), grads[3], 5);
    // A mild outlier (20×) is a strike at its first step: the step goes through...
    const first = await Promise.allSettled(comms.map((c, r) => checkContributions(c, grads[r], 4, { ratio: 10 })));
    expect(first.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    // ...and the same rank again at the next step is named.
    const out = await Promise.allSettled(comms.map((c, r) => checkContributions(c, grads[r], 5, { ratio: 10 })));
    for (const o of out) {
      expect(o.status).toBe('rejected');
      const err = (o as PromiseRejectedResult).reason as RingtrainError;
      expect(err.code).toBe(ErrorCode.PeerMisbehaved);
      expect(err.detail).toMatchObject({ peer: 3, culprits: [3], step: 5 });
      expect(err.message).toContain('rank 3');
    }
    for (const events of seen) expect(misbehaved(events).map((e) => e.peer)).toEqual([3]);
  });

  it('names a severe outlier (1e30) at once, and forgives a single mild spike', async () => {
    const { comms } = ring(4);
    const severe = comms.map((_, r) => new Float32Array(10).fill(r === 1 ? 1e30 : 0.5));
    const out = await Promise.allSettled(comms.map((c, r) => checkContributions(c, severe[r], 0)));
    for (const o of out)
      expect(((o as PromiseRejectedResult).reason as RingtrainError).detail).toMatchObject({ peer: 1 });
    const { comms: fresh } = ring(4);
    // Rank 2 spikes to 15× at step 0 (an honest small-batch gradient can), is ordinary at step 1, spikes again at 2.
    for (const [step, spike] of [
      [0, 15],
      [1, 1],
      [2, 15],
    ] as const) {
      const res = await Promise.allSettled(
        fresh.map((c, r) => checkContributions(c, new Float32Array(10).fill(r === 2 ? spike : 1), step, { ratio: 10 })),
      );
      expect(
        res.every((o) => o.status === 'fulfilled'),
        `step ${step}`,
      ).toBe(true);
    }
  });

  it('late in training, measures against the recent typical norm, not a collapsed median', async () => {
    // npm start's CNN at step 823: most ranks' batches learned (norm ~1.5e-3), one with a hard
    // example near 1.6 (1,100x that median), and two honest workers were ejected for it.
    const { comms, seen } = ring(4);
    const fill = (norms: number[]) => norms.map((n) => new Float32Array([n]));
    const stepWith = (step: number, norms: number[]) =>
      Promise.allSettled(comms.map((c, r) => checkContributions(c, fill(norms)[r], step)));
    let step = 0;
    // The recent past: norms spread over 1e-3 .. 1, as a nearly trained model's are.
    for (; step < 30; step++)
      expect(
        (await stepWith(step, [1.5e-3, 0.4 * (step % 3), 2e-3, 1e-3])).every((o) => o.status === 'fulfilled'),
        `step ${step}`,
      ).toBe(true);
    expect((await stepWith(step++, [1.4e-3, 1.5e-3, 1.648, 1.5e-3])).every((o) => o.status === 'fulfilled')).toBe(true);
    expect(seen.flatMap(misbehaved)).toEqual([]);
    // A rank scaled by 1e5 is still far past the typical norm, and named on every rank.
    const scaled = await stepWith(step, [1.5e-3, 1.5e-3, 1e5 * 2e-3, 2e-3]);
    for (const o of scaled)
      expect(((o as PromiseRejectedResult).reason as RingtrainError).detail).toMatchObject({ peer: 2 });
    expect(String(((scaled[0] as PromiseRejectedResult).reason as RingtrainError).message)).toMatch(
      /recent typical norm/,
    );
  });

  it('lets an honest step through with the norms', async () => {
    const { comms } = ring(3);
    const norms = await Promise.all(comms.map((c, r) => checkContributions(c, new Float32Array([3 + r, 4]), 0)));
    expect(Array.from(norms[2])).toEqual([5, Math.fround(Math.hypot(4, 4)), Math.fround(Math.hypot(5, 4))]);
  });
});

describe('a peer speaks only for itself: budget and malformed frames', () => {
  it('names the sender of a flood of unused tags within the budget, and drops what it left', async () => {
    const { comms, seen } = ring(3, { maxBytes: 1 << 20 });
    const pending = comms.map((c) => c.recv((c.rank + 1) % 3, { id: 7, step: 0, chunk: 0 }).catch((e: unknown) => e));
    await misbehaveOnWire(parseFault('flood-tags'), comms[2], 0);
    const errs = (await Promise.all(pending.slice(0, 2))) as RingtrainError[];
    for (const [r, err] of errs.entries()) {
      expect(err.code, `rank ${r}`).toBe(ErrorCode.PeerMisbehaved);
      expect(err.detail).toMatchObject({ peer: 2 });
      expect(misbehaved(seen[r]).map((e) => e.peer)).toEqual([2]);
    }
    // The flood ended at the first frame past 1 MiB: nothing of it is held any more.
    const inbox = (comms[0] as unknown as { inbox: { budget: UnconsumedBudget; arrived: Map<string, Uint8Array> } })
      .inbox;
    expect(inbox.budget.heldBytes(2)).toBe(0);
    expect(inbox.arrived.size).toBe(0);
  });

  it("widens a peer's budget by what a collective under way expects from it, and only while it runs", () => {
    const budget = new UnconsumedBudget({ maxBytes: 1000, maxMessages: 100 });
    const end = budget.allow(2, 4000);
    // A ring neighbour N−2 steps ahead: whole chunks held before their receive, past the fixed budget.
    expect(budget.hold(2, 3000)).toBeNull();
    expect(budget.hold(2, 1500)).toBeNull();
    expect(budget.hold(2, 1000)).toBe('left 5500 bytes of messages nobody asked for (budget 5000)');
    expect(budget.hold(1, 1500), 'another peer keeps the fixed budget').toMatch(/left 1500 bytes.*budget 1000\)$/);
    end();
    end();
    expect(budget.check(2), 'the allowance ends with the collective (once)').toMatch(/left 5500 bytes.*budget 1000\)$/);
  });

  it('keeps honest early arrivals: messages sent before their receive are delivered and released', async () => {
    const { comms } = ring(2, { maxBytes: 1000 });
    for (let i = 0; i < 5; i++) await comms[0].send(1, { id: 1, step: i, chunk: 0 }, new Uint8Array(150));
    for (let i = 0; i < 5; i++) expect((await comms[1].recv(0, { id: 1, step: i, chunk: 0 })).byteLength).toBe(150);
    // All released: the budget is not a lifetime cap.
    for (let i = 0; i < 5; i++) await comms[0].send(1, { id: 2, step: i, chunk: 0 }, new Uint8Array(150));
    expect(comms[1].error).toBeNull();
  });

  it('names the sender of a malformed frame, not the ranks that pass the abort on', async () => {
    const { comms, seen } = ring(3);
    const pending = comms.map((c) => c.recv((c.rank + 1) % 3, { id: 1, step: 0, chunk: 0 }).catch((e: unknown) => e));
    await misbehaveOnWire(parseFault('garbage-frames'), comms[1], 0);
    const errs = (await Promise.all([pending[0], pending[2]])) as RingtrainError[];
    for (const err of errs) {
      expect(err.code).toBe(ErrorCode.PeerMisbehaved);
      expect(err.detail).toMatchObject({ peer: 1 });
    }
    expect(misbehaved(seen[0]).map((e) => e.peer)).toEqual([1]);
    expect(misbehaved(seen[2]).map((e) => e.peer)).toEqual([1]);
    expect(misbehaved(seen[1])).toEqual([]);
  });

  it("backs another rank's flood report only with evidence of its own: hearsay names no one", async () => {
    for (const evidence of [true, false]) {
      const { comms, seen } = ring(3);
      const pending = comms[1].recv(0, { id: 1, step: 0, chunk: 0 }).catch((e: unknown) => e);
      // Rank 2 left rank 1 a message for a collective that will not run for a long time.
      if (evidence) await comms[2].send(1, { id: 0xfff00000, step: 0, chunk: 0 }, new Uint8Array(8));
      comms[0].abort(new RingtrainError(ErrorCode.PeerMisbehaved, 'rank 2 floods', { peer: 2 }));
      const err = (await pending) as RingtrainError;
      expect(err.code).toBe(ErrorCode.PeerMisbehaved);
      expect(
        misbehaved(seen[1]).map((e) => e.peer),
        `evidence ${evidence}`,
      ).toEqual(evidence ? [2] : []);
    }
  });

  it('reads an abort note as untrusted text: wrong types dropped, unknown codes as ERR_ABORTED', () => {
    const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
    for (const junk of ['null', '[1,2]', '"text"', '{not json', '42'])
      expect(readAbortNote(enc(junk)), junk).toEqual({ code: ErrorCode.Aborted, message: undefined, detail: {} });
    expect(readAbortNote(enc({ code: 'ERR_MADE_UP', message: 'x'.repeat(5000), detail: 'str' }))).toEqual({
      code: ErrorCode.Aborted,
      message: 'x'.repeat(1000),
      detail: {},
    });
    expect(readAbortNote(enc({ code: ErrorCode.PeerLost, message: 'gone', detail: { peer: 2 } }))).toEqual({
      code: ErrorCode.PeerLost,
      message: 'gone',
      detail: { peer: 2 },
    });
  });

  it("holds the forger's claim on every honest rank, whichever abort arrived first; a relay alone blames no one", async () => {
    const { comms } = ring(3);
    const note = (detail: object) =>
      new TextEncoder().encode(JSON.stringify({ code: ErrorCode.PeerLost, message: 'gone', detail }));
    // Rank 2 hears first a relay (from rank 1, origin 0, claiming rank 2 itself went away)...
    comms[1]
      .linkTo(2)!
      .send(encodeFrames(FrameKind.Abort, { id: 0, step: 0, chunk: 0 }, note({ peer: 2, origin: 0 }))[0]);
    await expect.poll(() => comms[2].error?.detail?.origin).toBe(0);
    // ...which holds nothing against anyone, on any rank (rank 0, named as its origin, blames the relayer's word on no
    // one).
    await expect.poll(() => comms[0].error?.code).toBe(ErrorCode.PeerLost);
    expect(comms.map((c) => c.lossClaims.size)).toEqual([0, 0, 0]);
    // Then the forger's own frames: to rank 1 "rank 2 went away", to rank 2 "rank 1 went away".
    await misbehaveOnWire(parseFault('forge-abort'), comms[0], 0);
    await expect.poll(() => [comms[1].lossClaims.has(0), comms[2].lossClaims.has(0)]).toEqual([true, true]);
    expect(comms[2].lossClaims.get(0)).toMatch(/saying rank 1 went away/);
    // No honest rank holds anything against another.
    expect([...comms[1].lossClaims.keys(), ...comms[2].lossClaims.keys()]).toEqual([0, 0]);
  });

  it("keeps the forger's claim when a relay came first and the rank closed its ring at once (as a regroup does)", async () => {
    const { comms } = ring(3);
    // Rank 2 is inside a collective; when its ring breaks it closes the communicator at once, as the trainer's regroup
    // does.
    const closed = comms[2].recv(1, { id: 1, step: 0, chunk: 0 }).catch(() => comms[2].close());
    const note = new TextEncoder().encode(
      JSON.stringify({ code: ErrorCode.PeerLost, message: 'gone', detail: { peer: 2, origin: 0 } }),
    );
    // Rank 1's relay reaches rank 2 first; the forger's own frame, sent meanwhile, is still on its way.
    comms[1].linkTo(2)!.send(encodeFrames(FrameKind.Abort, { id: 0, step: 0, chunk: 0 }, note)[0]);
    await misbehaveOnWire(parseFault('forge-abort'), comms[0], 0);
    await closed;
    // Closing waited for the forger's goodbye acknowledgement, which follows everything it sent before.
    expect(comms[2].lossClaims.get(0)).toMatch(/saying rank 1 went away/);
  });

  it('backs a flood report as soon as the flooder shows it here, even after the ring aborted', async () => {
    const { comms, seen } = ring(3);
    comms[1].abort(new RingtrainError(ErrorCode.PeerMisbehaved, 'rank 2 floods', { peer: 2 }));
    await expect.poll(() => comms[0].error?.code).toBe(ErrorCode.PeerMisbehaved);
    expect(misbehaved(seen[0])).toEqual([]);
    // Later, rank 2's flood reaches rank 0 too: a message for a collective far beyond any run here.
    comms[2].linkTo(0)!.send(encodeFrames(FrameKind.Data, { id: 0xfff00000, step: 0, chunk: 0 }, new Uint8Array(8))[0]);
    await expect.poll(() => misbehaved(seen[0]).map((e) => e.peer)).toEqual([2]);
  });

  it('says which peers a forged abort could not be sent to', async () => {
    const { comms, mesh } = ring(3);
    // Rank 0's link to rank 2 goes down (an attacker's send fails like anyone's).
    mesh[0].get(2)!.close();
    const said: string[] = [];
    await misbehaveOnWire(parseFault('forge-abort'), comms[0], 0, (line) => said.push(line));
    expect(said).toEqual([expect.stringMatching(/^--chaos forge-abort: nothing went to rank 2: .*closed/)]);
  });

  it('keeps the origin of an abort as it is passed on', async () => {
    const { comms } = ring(3);
    const pending = comms.map((c) => c.recv((c.rank + 2) % 3, { id: 1, step: 0, chunk: 0 }).catch((e: unknown) => e));
    await misbehaveOnWire(parseFault('forge-abort'), comms[0], 0);
    const errs = (await Promise.all([pending[1], pending[2]])) as RingtrainError[];
    for (const err of errs) expect(err.detail).toMatchObject({ origin: 0 });
  });
});

describe('--chaos (the chaos entry)', () => {
  it('parses each form', () => {
    expect(parseFault('nan@step:50')).toEqual({ kind: 'nan', fromStep: 50 });
    expect(parseFault('scale:1e30')).toEqual({ kind: 'scale', factor: 1e30, fromStep: 0 });
    expect(parseFault('scale:-20@step:3')).toEqual({ kind: 'scale', factor: -20, fromStep: 3 });
    expect(parseFault('garbage-frames')).toEqual({ kind: 'garbage-frames', fromStep: 0 });
    expect(parseFault('forge-abort@step:2')).toEqual({ kind: 'forge-abort', fromStep: 2 });
    expect(parseFault('flood-tags')).toEqual({ kind: 'flood-tags', fromStep: 0 });
    expect(parseFault('slow:3x')).toEqual({ kind: 'slow', factor: 3, fromStep: 0 });
  });

  it('refuses unknown and malformed forms with a clear error', () => {
    for (const bad of ['explode', 'scale:0', 'scale:abc', 'nan@later', 'slow:3', 'nan:1', 'scale:2@step:1@step:2']) {
      let err: unknown;
      try {
        parseFault(bad);
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(RingtrainError);
      expect((err as RingtrainError).code).toBe(ErrorCode.InvalidArgument);
      expect((err as RingtrainError).message).toMatch(/^--chaos '.*'.*\. The forms are/);
    }
  });

  it('tampers gradients only from its step on', () => {
    const g = new Float32Array([1, -2]);
    tamperGradients(parseFault('scale:-20@step:3'), g, 2);
    expect(Array.from(g)).toEqual([1, -2]);
    tamperGradients(parseFault('scale:-20@step:3'), g, 3);
    expect(Array.from(g)).toEqual([-20, 40]);
    tamperGradients(parseFault('nan'), g, 0);
    expect(g.every(Number.isNaN)).toBe(true);
  });
});
