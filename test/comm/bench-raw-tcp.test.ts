/**
 * `bench allreduce --transport tcp` holds the ring to a plain TCP stream between two of its
 * processes, in the same run (issue 34): `raw_tcp_MBps` and `ratio_raw_tcp`; and to plain streams on
 * every link of the ring at once, `raw_tcp_ring_MBps` and `ratio_raw_tcp_ring`. Three Node peers
 * (so that a rank's left and right neighbours differ) over loopback, inside a network namespace (the
 * bench enters one by itself when not in one).
 */
import { describe, expect, it } from 'vitest';
import { benchAllreduce } from '../../src/cli/commands/bench-allreduce.node.ts';

describe('bench allreduce over TCP', () => {
  it('prints raw TCP streams measured in the same run, one link and every link at once, and busbw against them', async () => {
    const r = await benchAllreduce({ peers: 3, bytes: 1 << 20, transport: 'tcp', fp16: false, iterations: 1 });
    expect(r).toMatchObject({ peers: 3, transport: 'tcp' });
    expect(r.raw_tcp_MBps).toBeGreaterThan(0);
    expect(r.ratio_raw_tcp).toBeCloseTo(r.busbw_MBps / r.raw_tcp_MBps!, 2);
    expect(r.raw_tcp_in_place_MBps).toBeGreaterThan(0);
    expect(r.ratio_raw_tcp_in_place).toBeCloseTo(r.busbw_MBps / r.raw_tcp_in_place_MBps!, 2);
    expect(r.raw_tcp_ring_MBps).toBeGreaterThan(0);
    expect(r.ratio_raw_tcp_ring).toBeCloseTo(r.busbw_MBps / r.raw_tcp_ring_MBps!, 2);
    expect(r.p2p_ring_MBps).toBeGreaterThan(0);
    expect(r.ratio_ring).toBeCloseTo(r.busbw_MBps / r.p2p_ring_MBps!, 2);
    // Memory links have no TCP stream to compare with.
    const memory = await benchAllreduce({ peers: 2, bytes: 1 << 16, transport: 'memory', fp16: false, iterations: 1 });
    expect(memory.raw_tcp_MBps).toBeUndefined();
    expect(memory.raw_tcp_ring_MBps).toBeUndefined();
  }, 120_000);
});
