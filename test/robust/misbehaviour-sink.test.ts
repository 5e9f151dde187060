/**
 * Misbehaviour reaches the sink it was handed, whether or not anyone listens to
 * the event bus (a session reports through the sink; the event is only for the
 * timeline).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { Misbehaviour, MisbehaviourSink } from '../../src/comm/misbehaviour.ts';
import { rejectOffences } from '../../src/distributed/guard.ts';
import { isRingtrainError } from '../../src/core/errors.ts';

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
});
