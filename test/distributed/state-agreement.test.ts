/**
 * The state check's decision (state-agreement.ts): a digest held by more than
 * half the ranks is the ring's, the others are a minority; with no such digest
 * nobody is named. Then the check itself over a ring of memory links, with a
 * model and optimizer that hold their state in plain arrays: a perturbed rank
 * is named on every rank and resynced from the majority, named again at the
 * next check if it differs again, and two ranks that differ stop the run.
 * Last, the check that rides: the digests read after a step are gathered beside
 * the next step's gradient allreduce (a GradientReducer over signed memory
 * links), which waits for no round more than a step without them, and judged
 * after it; a ring that re-formed in between drops them.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';
import {
  hex,
  judgeStateHashes,
  StateAgreement,
  stateDigest,
  stateDigestRide,
} from '../../src/distributed/robust/state-agreement.ts';
import { GradientReducer, type ReducedModel } from '../../src/distributed/reduce/gradient-reducer.ts';
import { RoundCounter } from '../../src/distributed/observe/timeline.ts';
import { ring, signedRing } from '../robust/memory-ring.ts';
import type { Misbehaviour, MisbehaviourSink } from '../../src/comm/misbehaviour.ts';
import type { Communicator } from '../../src/comm/interface.ts';
import type { RingEvent } from '../../src/core/events.ts';

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

/** A model whose gradients are `rank + 1` everywhere, for a reducer to sum (the ride reads none of them). */
function gradients(rank: number): ReducedModel {
  const grads = new Float32Array(64).fill(rank + 1);
  return {
    flatLength: grads.length,
    layout: [{ name: 'w', shape: [64], offset: 0, length: 64 }],
    readGrads: async () => grads.slice(),
  } as unknown as ReducedModel;
}

/** Every rank's reducer with the ride as its only check, and a round counter over each rank's own collectives. */
function ridingRing(comms: Communicator[], seen: RingEvent[][]) {
  return comms.map((comm, rank) => {
    const counter = new RoundCounter();
    comm.events.on((e) => void (e.rank === rank && counter.record(e)));
    const reducer = new GradientReducer(comm, gradients(rank), { checks: [stateDigestRide] });
    return { comm, counter, reducer, events: seen[rank] };
  });
}

describe('the state check riding beside the gradient allreduce', () => {
  it("gathers the digests beside the next step's allreduce, no round more, and names and resyncs the minority after it", async () => {
    const { comms, seen } = await signedRing(3);
    const ranks = ridingRing(comms, seen);
    const replicas = [replica(5), replica(5), replica(5)];
    const agreedHash = await replicas[0].agreement.localHash();
    replicas[1].params[3] += 1e-3;
    const step = (n: number) =>
      Promise.all(
        ranks.map(({ reducer, counter }) =>
          reducer.reduce({ weight: 1, step: n }, () => {}).then(() => counter.step()),
        ),
      );

    // The first step negotiates its allreduce; the second is a step without the ride.
    await step(8);
    const plain = await step(9);
    await Promise.all(replicas.map((r, i) => r.agreement.prepare(comms[i], 10)));
    const riding = await step(11);
    for (const [i, rounds] of riding.entries()) {
      expect(rounds.byName, `rank ${i}`).toMatchObject({ 'state-hash': 1 });
      expect(rounds.collectives, `rank ${i}`).toBe(plain[i].collectives + 1);
      // Begun before the allreduce and still running when it began: no round of its own.
      expect(rounds.sequential, `rank ${i}`).toBe(plain[i].sequential);
    }
    // Nothing was named before the step's end: the gathered digests are judged between steps.
    expect(seen[0].some((e) => e.type === 'state-differs')).toBe(false);
    const judged = await Promise.all(replicas.map((r, i) => r.agreement.judgeRide(comms[i])));
    expect(judged).toEqual([agreedHash, agreedHash, agreedHash]);
    expect(replicas[1].params).toEqual(replicas[0].params);
    for (const events of seen)
      expect(events.filter((e) => e.type === 'state-differs')).toMatchObject([{ peer: 1, step: 10, resyncFrom: 0 }]);
    expect(replicas[0].agreement.agreed).toEqual({ hash: agreedHash, step: 10 });
  });

  it('drops digests read or gathered on a ring that re-formed since: the re-form handed every rank the root state', async () => {
    const first = await signedRing(3);
    const replicas = [replica(6), replica(6), replica(6)];
    replicas[2].params[0] = 7;
    // Read on the first ring; the ring re-forms before a step takes them along.
    await Promise.all(replicas.map((r, i) => r.agreement.prepare(first.comms[i], 10)));
    const second = await signedRing(3);
    const ranks = ridingRing(second.comms, second.seen);
    await Promise.all(ranks.map(({ reducer }) => reducer.reduce({ weight: 1, step: 11 }, () => {})));
    expect(await Promise.all(replicas.map((r, i) => r.agreement.judgeRide(second.comms[i])))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    for (const events of second.seen) {
      expect(events.filter((e) => e.type === 'collective-begin').map((e) => e.name)).not.toContain('state-hash');
      expect(events.some((e) => e.type === 'state-differs')).toBe(false);
    }
    // Gathered beside a step on the first ring, then judged on the second: dropped too.
    await Promise.all(replicas.map((r, i) => r.agreement.prepare(first.comms[i], 20)));
    const old = ridingRing(first.comms, first.seen);
    await Promise.all(old.map(({ reducer }) => reducer.reduce({ weight: 1, step: 21 }, () => {})));
    expect(first.seen[0].filter((e) => e.type === 'collective-begin').map((e) => e.name)).toContain('state-hash');
    expect(await Promise.all(replicas.map((r, i) => r.agreement.judgeRide(second.comms[i])))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(first.seen[0].some((e) => e.type === 'state-differs')).toBe(false);
  });
});
