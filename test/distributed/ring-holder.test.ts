/**
 * `new DistributedOptimizer(session.comm, …)`: a communicator that a session
 * formed is recorded as the session's, so the optimizer reduces over the
 * session's current ring after it re-forms, as one built over the session
 * does; a communicator of one's own stays the optimizer's ring. Memory rings
 * stand in for the session's rings: the first of 3 ranks, then a re-formed
 * one of 2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/communicator.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { DistributedOptimizer } from '../../src/distributed/api/optimizer.ts';
import { type CurrentRing, recordRingHolder } from '../../src/distributed/session/elastic-ring.ts';
import { createModel } from '../../src/engine/create.ts';
import { SGD } from '../../src/engine/optimizer.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import * as nn from '../../src/nn/index.ts';

/** What a session is to the optimizer: whatever holds its current ring, replaced when it re-forms. */
class Holder implements CurrentRing {
  comm!: Communicator;
  form(comm: Communicator): void {
    this.comm = comm;
    recordRingHolder(comm, this);
  }
}

const X = new Float32Array([1, 0, 0, 1]);

describe('DistributedOptimizer over session.comm', () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await acquireGpu();
  });
  afterAll(() => gpu.destroy());

  it('follows the ring its session re-forms; a communicator of its own stays put', async () => {
    const first = createMemoryRing(3);
    const holders = first.map((c) => {
      const h = new Holder();
      h.form(c);
      return h;
    });
    const models = [0, 1, 2].map((r) =>
      createModel(gpu, new nn.Linear(2, 2), { inputShape: [2], classes: 2, seed: 1, name: 'lin' }),
    );
    // Built over the communicator, as a user holding session.comm would.
    const opts = models.map(
      (m, r) => new DistributedOptimizer(holders[r].comm, m, new SGD(m, { lr: 0.5, momentum: 0 })),
    );
    expect(opts.map((o, r) => o.comm === first[r])).toEqual([true, true, true]);
    const step = (ranks: number[]) =>
      Promise.all(
        ranks.map(async (r) => {
          await models[r].forwardBackward(X, [r % 2, (r + 1) % 2]);
          await opts[r].step();
        }),
      );
    await step([0, 1, 2]);

    // Rank 2 is gone: ranks 0 and 1 re-form a ring of 2, and the session holds the new one.
    await Promise.all(first.map((c) => c.close()));
    const second = createMemoryRing(2);
    holders[0].form(second[0]);
    holders[1].form(second[1]);
    expect(opts[0].comm).toBe(second[0]);
    expect(opts[1].comm.size).toBe(2);
    for (const o of opts.slice(0, 2)) o.ringReformed();
    await step([0, 1]);
    const [w0, w1] = await Promise.all([models[0].readParams(), models[1].readParams()]);
    expect(Array.from(w0)).toEqual(Array.from(w1));

    // A communicator no session formed is the optimizer's own ring.
    const own = createMemoryRing(1);
    const fixed = new DistributedOptimizer(own[0], models[2], new SGD(models[2]));
    expect(fixed.comm).toBe(own[0]);
    for (const m of models) m.destroy();
  });
});
