/**
 * How many bucket reductions run at once (src/distributed/reduce/overlap.ts): buckets whose bytes
 * fit in IN_FLIGHT_BYTES go side by side, bigger ones one at a time, so a peer never runs further
 * ahead than the communicator's budget for early messages holds. Reductions begin in bucket order
 * either way (every rank's order), and the checks' collectives (`beforeLast`) between the last two.
 */
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/comm/interface.ts';
import { EventBus } from '../../src/core/events.ts';
import { IN_FLIGHT_BYTES, reduceBucketsAsRead } from '../../src/distributed/reduce/overlap.ts';

/** Reduces `count` buckets of `bucketBytes` each, every reduction held until all that can start have. */
async function run(count: number, bucketBytes: number) {
  const length = bucketBytes / Float32Array.BYTES_PER_ELEMENT;
  const flat = new Float32Array(count * length);
  const log: string[] = [];
  let running = 0;
  let most = 0;
  const pending: (() => void)[] = [];
  // Lets the reductions that began finish, one macrotask later (the window has begun all it may by then).
  const release = () => setTimeout(() => pending.splice(0).forEach((f) => f()), 0);
  await reduceBucketsAsRead({
    comm: { rank: 0, size: 2, events: new EventBus() } as unknown as Communicator,
    buckets: Array.from({ length: count }, (_, i) => ({
      offset: i * length,
      length,
      ready: Promise.resolve(new Float32Array(length).fill(i)),
    })),
    weight: 1,
    flat,
    overlap: true,
    local: null,
    prepare: async () => {},
    beforeLast: async () => void log.push('checks'),
    name: 'gradients',
    reduce: (_values, name) => {
      log.push(name);
      most = Math.max(most, ++running);
      release();
      return new Promise<void>((resolve) => pending.push(() => (running--, resolve())));
    },
  });
  return { log, most, flat };
}

describe('bucket reductions in flight', () => {
  it('small buckets all go side by side, in order, the checks before the last', async () => {
    const { log, most, flat } = await run(4, 4096);
    expect(log).toEqual([
      'gradients bucket 1/4',
      'gradients bucket 2/4',
      'gradients bucket 3/4',
      'checks',
      'gradients bucket 4/4',
    ]);
    expect(most).toBe(4);
    expect(flat[1024 * 3]).toBe(3);
  });

  it('buckets over half the window go one at a time, in the same order', async () => {
    const bytes = Math.ceil((IN_FLIGHT_BYTES * 0.6) / 4) * 4;
    const { log, most } = await run(3, bytes);
    expect(log).toEqual(['gradients bucket 1/3', 'gradients bucket 2/3', 'checks', 'gradients bucket 3/3']);
    expect(most).toBe(1);
  });
});
