/** The benchmark's bookkeeping (not its speed): fields, units and the nccl-tests busbw formula. */
import { describe, expect, it } from 'vitest';
import { benchAllreduce, benchSweep, parseBytes } from '../../src/cli/commands/bench-allreduce.node.ts';
import { autoAlgorithm } from '../../src/collectives/allreduce.ts';
import { SWEEP_BYTES } from '../../src/collectives/measure.ts';
import { DEFAULT_MEDIUM_BYTES, DEFAULT_SMALL_BYTES } from '../../src/collectives/codecs/types.ts';

describe('bench allreduce', () => {
  it('reads sizes in binary units and refuses nonsense', () => {
    expect(parseBytes('64MiB')).toBe(64 * 1024 * 1024);
    expect(parseBytes('1M')).toBe(1024 * 1024);
    expect(parseBytes('512KiB')).toBe(512 * 1024);
    expect(parseBytes('4096')).toBe(4096);
    expect(() => parseBytes('lots')).toThrow(/cannot read 'lots' as a size/);
  });

  it('reports one consistent record over the memory transport', async () => {
    const r = await benchAllreduce({ peers: 3, bytes: 96 * 1024, transport: 'memory', fp16: false, iterations: 2 });
    expect(r).toMatchObject({ peers: 3, bytes: 96 * 1024, transport: 'memory', fp16: false });
    expect(r.algbw_MBps).toBeGreaterThan(0);
    expect(r.busbw_MBps).toBeCloseTo((r.algbw_MBps * 2 * 2) / 3, 1);
    expect(r.p2p_MBps).toBeGreaterThan(0);
    expect(r.ratio).toBeCloseTo(r.busbw_MBps / r.p2p_MBps!, 2);
    expect(r.ratio_bidir).toBeCloseTo(r.busbw_MBps / r.p2p_bidir_MBps!, 2);
    expect(r.fp16_speedup).toBeUndefined();
    // Latency: each algorithm forced, and a round trip of the same bytes on one link, in the same loop.
    expect(r.algorithm).toBe(autoAlgorithm(96 * 1024, 3, DEFAULT_SMALL_BYTES, DEFAULT_MEDIUM_BYTES)); // what 'auto' runs at this size
    expect(r.seconds.length).toBe(4); // two bandwidth runs, two in the latency loop
    for (const k of [
      'latency_ms',
      'latency_ring_ms',
      'latency_rd_ms',
      'latency_hd_ms',
      'latency_two_shot_ms',
      'p2p_rtt_ms',
    ] as const)
      expect(r[k], k).toBeGreaterThan(0);
    expect(r.latency_ratio).toBeCloseTo(r.latency_ms / r.p2p_rtt_ms!, 1);
    // 'auto' took no ring at this size: no reduce-scatter/allgather boundary to time.
    expect(r.ring_phase_gap_ms).toBeNull();
    // The memory transport's peers share this process: no figure per peer.
    expect(r).toMatchObject({
      peak_rss_bytes_by_peer: null,
      rss_before_bytes_by_peer: null,
      peak_rss_over_tensor: null,
    });
  });

  it("times the ring's wait between its reduce-scatter and its allgather when 'auto' takes the ring", async () => {
    const r = await benchAllreduce({
      peers: 2,
      bytes: 2 * 1024 * 1024,
      transport: 'memory',
      fp16: false,
      iterations: 1,
    });
    expect(r.algorithm).toBe('ring');
    expect(r.ring_phase_gap_ms).toBeGreaterThanOrEqual(0);
    expect(r.ring_phase_gap_ms).toBeLessThan(r.latency_ms);
  });

  it('sweeps the four algorithms over sizes and names the largest sizes recursive doubling, then any of the others but the ring, win', async () => {
    const r = await benchSweep({ peers: 3, bytes: 4, transport: 'memory', fp16: false, iterations: 1 });
    expect(r.points.map((p) => p.bytes)).toEqual(SWEEP_BYTES);
    for (const p of r.points)
      expect(p.ring_ms > 0 && p.rd_ms > 0 && p.hd_ms > 0 && p.two_shot_ms > 0, JSON.stringify(p)).toBe(true);
    const largest = (xs: number[]) => (xs.length ? Math.max(...xs) : 0);
    const small = largest(
      r.points.filter((p) => p.rd_ms <= Math.min(p.ring_ms, p.hd_ms, p.two_shot_ms)).map((p) => p.bytes),
    );
    expect(r.small_bytes).toBe(small);
    expect(r.medium_bytes).toBe(
      Math.max(
        small,
        largest(r.points.filter((p) => Math.min(p.rd_ms, p.hd_ms, p.two_shot_ms) <= p.ring_ms).map((p) => p.bytes)),
      ),
    );
  });

  it('times float32 beside fp16 in the same run and reports the speed-up', async () => {
    const r = await benchAllreduce({ peers: 2, bytes: 64 * 1024, transport: 'memory', fp16: true, iterations: 2 });
    expect(r.fp16).toBe(true);
    expect(r.f32_algbw_MBps).toBeGreaterThan(0);
    expect(r.fp16_speedup).toBeCloseTo(r.algbw_MBps / r.f32_algbw_MBps!, 1);
  });

  it('reports each peer process its peak resident memory, and the peak per byte of tensor', async () => {
    const r = await benchAllreduce({ peers: 2, bytes: 1024 * 1024, transport: 'tcp', fp16: false, iterations: 1 });
    expect(r.peak_rss_bytes_by_peer).toHaveLength(2);
    r.peak_rss_bytes_by_peer!.forEach((peak, rank) => {
      const before = r.rss_before_bytes_by_peer![rank]!;
      expect(before).toBeGreaterThan(0);
      expect(peak).toBeGreaterThanOrEqual(before);
    });
    const growth = r.peak_rss_bytes_by_peer!.map((p, i) => p! - r.rss_before_bytes_by_peer![i]!);
    expect(r.peak_rss_over_tensor).toBeCloseTo(Math.max(...growth) / r.bytes, 2);
  }, 120_000);

  it('refuses bad options with InvalidArgument', async () => {
    await expect(benchAllreduce({ peers: 0, bytes: 1024, transport: 'memory', fp16: false })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    await expect(
      benchAllreduce({ peers: 2, bytes: 1024, transport: 'pigeon' as 'memory', fp16: false }),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
