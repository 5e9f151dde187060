/**
 * Misbehaviour reaches the sink it was handed, whether or not anyone listens to
 * the event bus (a session reports through the sink; the event is only for the
 * timeline).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { Misbehaviour, MisbehaviourSink } from '../../src/comm/misbehaviour.ts';
import { rejectOffences } from '../../src/distributed/robust/guard.ts';
import { isRingtrainError } from '../../src/core/errors.ts';
import { allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { StepChecks } from '../../src/distributed/robust/step-checks.ts';

function collectingSink(): MisbehaviourSink & { found: Misbehaviour[] } {
  const found: Misbehaviour[] = [];
  return { found, peerMisbehaved: (f) => found.push(f) };
}

describe('MisbehaviourSink', () => {
  it('the communicator tells its sink of a flooding peer, with no one listening to its events', async () => {
    const sink = collectingSink();
    const [flooder, victim] = createMemoryRing(2, { misbehaviour: sink, budget: { maxMessages: 4 } });
    expect(victim.events.active, 'nobody listens to the bus').toBe(false);
    const broken = new Promise<unknown>((resolve) => victim.recv(0, { id: 999, step: 0, chunk: 0 }).catch(resolve));
    for (let chunk = 0; chunk < 8; chunk++)
      await flooder.send(1, { id: 1, step: 0, chunk }, new Uint8Array(16)).catch(() => undefined);
    const err = await broken;
    expect(isRingtrainError(err) && err.code).toBe('ERR_PEER_MISBEHAVED');
    expect(sink.found).toHaveLength(1);
    expect(sink.found[0]).toMatchObject({ rank: 1, peer: 0 });
    expect(sink.found[0].reason).toMatch(/nobody asked for/);
    await Promise.all([flooder.close(), victim.close()].map((p) => p.catch(() => undefined)));
  });

  it("the guard's verdict names each offender to the sink before it throws", () => {
    const sink = collectingSink();
    const [comm] = createMemoryRing(1);
    const offences = [
      { rank: 2, reason: 'its gradient norm is not finite' },
      { rank: 3, reason: 'its norm is 1e6 times the median' },
    ];
    expect(() => rejectOffences(comm, 7, offences, [1, 1, NaN, 1e6], sink)).toThrow(/step 7 was dropped/);
    expect(sink.found).toEqual([
      { rank: 0, peer: 2, reason: 'step 7: its gradient norm is not finite' },
      { rank: 0, peer: 3, reason: 'step 7: its norm is 1e6 times the median' },
    ]);
    rejectOffences(comm, 8, [], [1], sink);
    expect(sink.found, 'no offence, no finding').toHaveLength(2);
  });

  it("the step checks name a rank whose gradient is not finite to every rank's sink", async () => {
    const comms = createMemoryRing(3);
    const sinks = comms.map(() => collectingSink());
    const checks = sinks.map((misbehaviour) => new StepChecks({ seed: 4, misbehaviour }));
    const grads = comms.map((_, r) => Float32Array.from({ length: 64 }, (_, i) => (r === 2 && i === 5 ? NaN : i % 7)));
    const errors = await Promise.all(
      comms.map(async (c, r) => {
        try {
          await checks[r].before(c, grads[r], 0);
          await allreduceInPlace(c, grads[r], { op: 'average', name: 'g0' });
          await checks[r].after(c, grads[r], 1 / c.size);
          return null;
        } catch (e) {
          return e;
        }
      }),
    );
    for (const e of errors) expect(isRingtrainError(e) && e.code).toBe('ERR_PEER_MISBEHAVED');
    sinks.forEach((sink, r) => {
      expect(sink.found.map((f) => [f.rank, f.peer])).toEqual([[r, 2]]);
      expect(sink.found[0].reason).toMatch(/^step 0: /);
    });
    for (const c of comms) await c.close();
  });
});
