/**
 * The state check's decision (state-agreement.ts): a digest held by more than
 * half the ranks is the ring's, the others are a minority; with no such digest
 * nobody is named. Then the check itself over a ring of memory links, with a
 * model and optimizer that hold their state in plain arrays: a perturbed rank
 * is named on every rank and resynced from the majority, named again at the
 * next check if it differs again, and two ranks that differ stop the run.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';
import { hex, judgeStateHashes, StateAgreement, stateDigest } from '../../src/distributed/robust/state-agreement.ts';
import { ring } from '../robust/memory-ring.ts';
import type { Misbehaviour, MisbehaviourSink } from '../../src/comm/misbehaviour.ts';

describe('judgeStateHashes', () => {
  it('agrees when every rank holds one digest', () => {
    expect(judgeStateHashes(['a', 'a', 'a'])).toEqual({ kind: 'agreed', hash: 'a' });
    expect(judgeStateHashes(['a'])).toEqual({ kind: 'agreed', hash: 'a' });
  });

  it('names the minority and resyncs it from the lowest rank of the majority', () => {
    expect(judgeStateHashes(['a', 'b', 'a'])).toEqual({ kind: 'minority', hash: 'a', differing: [1], source: 0 });
    expect(judgeStateHashes(['b', 'a', 'a', 'a'])).toEqual({
      kind: 'minority',
      hash: 'a',
      differing: [0],
      source: 1,
    });
    // Two ranks of five, each with its own digest: still a minority against three.
    expect(judgeStateHashes(['c', 'a', 'a', 'b', 'a'])).toEqual({
      kind: 'minority',
      hash: 'a',
      differing: [0, 3],
      source: 1,
    });
  });

  it('names nobody without a majority', () => {
    expect(judgeStateHashes(['a', 'b'])).toEqual({ kind: 'no-majority', groups: [[0], [1]] });
    expect(judgeStateHashes(['a', 'b', 'b', 'a'])).toEqual({
      kind: 'no-majority',
      groups: [
        [0, 3],
        [1, 2],
      ],
    });
    expect(judgeStateHashes(['x', 'y', 'z']).kind).toBe('no-majority');
  });
});

describe('stateDigest', () => {
  it('changes with any bit of the weights or the optimizer state, and with the state names', async () => {
    const params = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i));
    const velocity = Float32Array.from({ length: 1000 }, (_, i) => Math.cos(i));
    const base = hex(await stateDigest(params, { velocity, step: Float32Array.of(3) }));
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(hex(await stateDigest(params.slice(), { step: Float32Array.of(3), velocity: velocity.slice() }))).toBe(base);
    const flipped = params.slice();
    new Uint32Array(flipped.buffer)[517] ^= 1;
    expect(hex(await stateDigest(flipped, { velocity, step: Float32Array.of(3) }))).not.toBe(base);
    expect(hex(await stateDigest(params, { velocity, step: Float32Array.of(4) }))).not.toBe(base);
    expect(hex(await stateDigest(params, { momentum: velocity, step: Float32Array.of(3) }))).not.toBe(base);
  });
});

/** A rank's state in plain arrays, behind the two interfaces the check reads and resyncs through. */
function replica(seed: number, misbehaviour?: MisbehaviourSink) {
  const params = Float32Array.from({ length: 300 }, (_, i) => Math.sin(i * seed));
  let velocity = Float32Array.from({ length: 300 }, (_, i) => Math.cos(i * seed));
  const model = {
    flatLength: params.length,
    readParams: () => Promise.resolve(params.slice()),
    writeParams: (v: Float32Array) => params.set(v),
  } as unknown as Model;
  const optimizer = {
    exportState: () => Promise.resolve({ velocity: velocity.slice() }),
    importState: (s: Record<string, Float32Array>) => void (velocity = s.velocity.slice()),
  } as unknown as Optimizer;
  return { params, velocity: () => velocity, agreement: new StateAgreement({ model, optimizer, misbehaviour }) };
}

async function settled<T>(work: Promise<T>[]): Promise<(T | RingtrainError)[]> {
  return Promise.all(work.map((w) => w.catch((e: RingtrainError) => e)));
}

describe('StateAgreement over a ring', () => {
  it('names a perturbed rank on every rank, resyncs it, and reports it when it differs again', async () => {
    const { comms, seen } = ring(3);
    const found: Misbehaviour[][] = [[], [], []];
    const ranks = found.map((f) => replica(1, { peerMisbehaved: (m) => void f.push(m) }));
    const agreedHash = await ranks[0].agreement.localHash();
    ranks[2].params[7] += 1e-3;

    const first = await Promise.all(ranks.map((r, i) => r.agreement.check(comms[i], 10)));
    expect(first).toEqual([agreedHash, agreedHash, agreedHash]);
    expect(await ranks[2].agreement.localHash()).toBe(agreedHash);
    expect(ranks[2].params).toEqual(ranks[0].params);
    for (const events of seen)
      expect(events.filter((e) => e.type === 'state-differs')).toMatchObject([
        { peer: 2, step: 10, resyncFrom: 0, majorityHash: agreedHash },
      ]);

    // Its optimizer state drifts this time: differs again at the next check, so it is reported.
    ranks[2].velocity()[3] = 42;
    const second = await settled(ranks.map((r, i) => r.agreement.check(comms[i], 20)));
    for (const err of second) {
      expect(err).toBeInstanceOf(RingtrainError);
      expect(err).toMatchObject({ code: ErrorCode.PeerMisbehaved, detail: { peer: 2, culprits: [2], step: 20 } });
    }
    for (const events of seen) expect(events.filter((e) => e.type === 'peer-misbehaved')).toMatchObject([{ peer: 2 }]);
    // Reported through each rank's sink (what a session sends the server), not only as an event.
    found.forEach((f, r) => expect(f.map((m) => [m.rank, m.peer])).toEqual([[r, 2]]));
  });

  it('resyncs again, not reports, a rank that differs after a check it passed', async () => {
    const { comms, seen } = ring(3);
    const ranks = [replica(2), replica(2), replica(2)];
    ranks[1].params[0] = 9;
    await Promise.all(ranks.map((r, i) => r.agreement.check(comms[i], 5)));
    await Promise.all(ranks.map((r, i) => r.agreement.check(comms[i], 10)));
    ranks[1].params[0] = 9;
    const hashes = await Promise.all(ranks.map((r, i) => r.agreement.check(comms[i], 15)));
    expect(new Set(hashes).size).toBe(1);
    expect(seen[0].filter((e) => e.type === 'state-differs').map((e) => e.step)).toEqual([5, 15]);
    expect(seen[0].some((e) => e.type === 'peer-misbehaved')).toBe(false);
  });

  it('stops both ranks of two that differ, naming nobody', async () => {
    const { comms, seen } = ring(2);
    const ranks = [replica(3), replica(4)];
    const results = await settled(ranks.map((r, i) => r.agreement.check(comms[i], 100)));
    for (const err of results) {
      expect(err).toBeInstanceOf(RingtrainError);
      expect(err).toMatchObject({ code: ErrorCode.StateMismatch, detail: { step: 100, groups: [[0], [1]] } });
      expect((err as RingtrainError).message).toMatch(/no majority holds one, so nobody can be told right/);
    }
    for (const events of seen)
      expect(events.some((e) => e.type === 'state-differs' || e.type === 'peer-misbehaved')).toBe(false);
  });
});
