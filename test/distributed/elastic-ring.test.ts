/**
 * The ring a trainer trains on, and how it re-forms (elastic-ring.ts), over
 * memory rings and membership hooks played by the test: a broken step re-forms
 * the ring and runs the re-form callbacks; a fixed ring throws the error as it
 * is; after a step the ranks agree on the newest membership any of them has
 * heard of, and re-form there together, reading the agreement a step started
 * beside its allreduce when there is one; and an optimizer reading the ring
 * through it sees the new communicator at once.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { EventBus, type RingEvent } from '../../src/core/events.ts';
import { ElasticRing, currentRing } from '../../src/distributed/session/elastic-ring.ts';
import type { ElasticHooks } from '../../src/distributed/train/trainer-types.ts';

/** Membership of rank `rank` in rings `rings[epoch]`: it has heard of epoch `latest`. */
function hooks(
  rings: Communicator[][],
  rank: number,
  heard: { latest: number },
): ElasticHooks & { regroups: number[] } {
  let epoch = 0;
  const regroups: number[] = [];
  return {
    regroups,
    currentEpoch: () => ({ generation: 0, epoch }),
    latestEpoch: () => ({ generation: 0, epoch: heard.latest }),
    regroup: async (minEpoch) => {
      regroups.push(minEpoch.epoch);
      epoch = Math.max(minEpoch.epoch, heard.latest);
      return rings[epoch][rank];
    },
  };
}

const lost = () => new RingtrainError(ErrorCode.PeerLost, 'rank 1 went away', { peer: 1 });

describe('ElasticRing', () => {
  it('re-forms a broken ring, runs the callbacks in order with the new communicator, and says the step must be taken again', async () => {
    const rings = [createMemoryRing(2), createMemoryRing(1)];
    const bus = new EventBus();
    const events: RingEvent[] = [];
    bus.on((e) => void events.push(e));
    const h = hooks(rings, 0, { latest: 0 });
    const ring = new ElasticRing(rings[0][0], h, { bus });
    const seen: string[] = [];
    ring.onReformed((comm) => void seen.push(`optimizer ${comm.size}`));
    ring.onReformed(async (comm) => void seen.push(`sync ${comm.size}`));
    expect(await ring.guarded(async () => {})).toBe(true);
    expect(await ring.guarded(() => Promise.reject(lost()))).toBe(false);
    expect(h.regroups).toEqual([1]);
    expect(seen).toEqual(['optimizer 1', 'sync 1']);
    expect(ring.comm).toBe(rings[1][0]);
    expect(events).toMatchObject([{ type: 'peer-lost', rank: 0, peer: 1, reason: 'rank 1 went away' }]);
    // An error that is not a broken ring is the caller's, elastic or not.
    await expect(
      ring.guarded(() => Promise.reject(new RingtrainError(ErrorCode.InvalidArgument, 'diverged'))),
    ).rejects.toThrow('diverged');
    for (const c of rings.flat()) c.close();
  });

  it('on a fixed ring, throws the broken ring as it is and never re-forms', async () => {
    const [comm] = createMemoryRing(1);
    const ring = new ElasticRing(comm, undefined, { bus: comm.events });
    expect(ring.elastic).toBe(false);
    await expect(ring.guarded(() => Promise.reject(lost()))).rejects.toMatchObject({ code: ErrorCode.PeerLost });
    expect(await ring.membershipChanged()).toBe(false);
    await expect(ring.regroup({ generation: 0, epoch: 1 })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringMatching(/no membership hooks, so it cannot re-form/),
    });
    comm.close();
  });

  it('re-forms on every rank when any one has heard of a newer membership, and an optimizer reading through it follows', async () => {
    const rings = [createMemoryRing(2), createMemoryRing(2), createMemoryRing(2)];
    // Only rank 1 has heard of epoch 2 (a joiner); rank 0 still knows epoch 0.
    const heard = [{ latest: 0 }, { latest: 2 }];
    const h = [0, 1].map((r) => hooks(rings, r, heard[r]));
    const ringOf = [0, 1].map((r) => new ElasticRing(rings[0][r], h[r], { bus: new EventBus() }));
    const holders = ringOf.map((ring) => currentRing(ring));
    expect(await Promise.all(ringOf.map((ring) => ring.membershipChanged()))).toEqual([true, true]);
    expect(h.map((x) => x.regroups)).toEqual([[2], [2]]);
    expect(holders.map((x) => x.comm)).toEqual([rings[2][0], rings[2][1]]);
    // Nothing newer heard: no re-form.
    expect(await Promise.all(ringOf.map((ring) => ring.membershipChanged()))).toEqual([false, false]);
    // A communicator of one's own is its own holder.
    expect(currentRing(rings[0][0]).comm).toBe(rings[0][0]);
    for (const c of rings.flat()) c.close();
  });

  it('reads the agreement a step started beside its allreduce: no collective of its own between steps, and the same re-form', async () => {
    const rings = [createMemoryRing(2), createMemoryRing(2), createMemoryRing(2)];
    const heard = [{ latest: 0 }, { latest: 0 }];
    const h = [0, 1].map((r) => hooks(rings, r, heard[r]));
    const ringOf = [0, 1].map((r) => new ElasticRing(rings[0][r], h[r], { bus: new EventBus() }));
    const begun: string[] = [];
    for (const c of rings.flat()) c.events.on((e) => void (e.type === 'collective-begin' && begun.push(e.name)));
    expect(
      new ElasticRing(rings[0][0], undefined, { bus: new EventBus() }).agreementCheck,
      'a fixed ring agrees on nothing',
    ).toBeUndefined();
    // A step: every rank starts the agreement as its gradients go out (the check's `before`).
    const step = () =>
      Promise.all(ringOf.map((ring, r) => ring.agreementCheck!.before!(ringOf[r].comm, new Float32Array(1), 0)));
    await step();
    expect(begun).toEqual(['membership-epoch', 'membership-epoch']);
    expect(await Promise.all(ringOf.map((ring) => ring.membershipChanged()))).toEqual([false, false]);
    expect(begun, 'read, not run again').toHaveLength(2);
    // Rank 1 hears of epoch 2 before the next step's agreement: both re-form after that step.
    heard[1].latest = 2;
    await step();
    expect(await Promise.all(ringOf.map((ring) => ring.membershipChanged()))).toEqual([true, true]);
    expect(h.map((x) => x.regroups)).toEqual([[2], [2]]);
    expect(begun).toHaveLength(4);
    // After a re-form no step has agreed on the new ring yet: the ranks agree between steps, as a fixed schedule would.
    expect(await Promise.all(ringOf.map((ring) => ring.membershipChanged()))).toEqual([false, false]);
    expect(begun).toHaveLength(6);
    for (const c of rings.flat()) c.close();
  });
});
