/** The benchmark's bookkeeping (not its speed): fields, units and the nccl-tests busbw formula. */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  benchAllreduce,
  benchSweep,
  memoryOf,
  parseBytes,
  type PeerRss,
} from '../../src/cli/commands/bench-allreduce.node.ts';
import { PeakRssWindows } from '../../src/cli/peak-rss.node.ts';
import { parseUdpReceiveDrops } from '../../src/cli/commands/bench-udp-drops.node.ts';
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
    // Every rank streaming to its right at once, timed apart from the exchange of ranks 0 and 1.
    expect(r.p2p_ring_MBps).toBeGreaterThan(0);
    expect(r.ratio_ring).toBeCloseTo(r.busbw_MBps / r.p2p_ring_MBps!, 2);
    // One exchange per bandwidth round, beside the ring's runs (p2p_bidir is their median).
    expect(r.bidir_seconds.length).toBe(2);
    for (const s of r.bidir_seconds) expect(s).toBeGreaterThanOrEqual(0);
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
      allreduce_peak_rss_bytes_by_peer: null,
      process_peak_rss_bytes_by_peer: null,
      rss_before_bytes_by_peer: null,
      peak_rss_over_tensor: null,
      process_peak_rss_over_tensor: null,
    });
  });

  it("reads a network namespace's UDP receive-buffer drops from /proc's counters, IPv4 and IPv6 together", () => {
    const snmp = [
      'Ip: Forwarding DefaultTTL InReceives',
      'Ip: 2 64 1200',
      'Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors',
      'Udp: 180903 0 1453 180911 1453 0 0 0 0',
      'UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors',
      'UdpLite: 0 0 0 0 7 0 0 0 0',
    ].join('\n');
    const snmp6 = [
      'Udp6InDatagrams                 \t178838',
      'Udp6RcvbufErrors                \t1290',
      'UdpLite6RcvbufErrors 5',
    ].join('\n');
    expect(parseUdpReceiveDrops(snmp, snmp6)).toBe(1453 + 1290);
    expect(parseUdpReceiveDrops(snmp, 'Udp6InDatagrams 3')).toBeNull();
    expect(parseUdpReceiveDrops('Udp: InDatagrams\nUdp: 4', snmp6)).toBeNull();
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
    // At two ranks the ring of streams is the both-ways exchange: one figure, from the same runs.
    expect(r.p2p_ring_MBps).toBe(r.p2p_bidir_MBps);
    expect(r.ratio_ring).toBe(r.ratio_bidir);
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

  it("reports each peer's peak inside the timed allreduces apart from its whole run's, both per byte of tensor", async () => {
    const bytes = 32 * 1024 * 1024;
    const r = await benchAllreduce({ peers: 2, bytes, transport: 'tcp', fp16: false, iterations: 1 });
    expect(r.peak_rss_unavailable).toBeUndefined();
    const peaks = r.allreduce_peak_rss_bytes_by_peer!;
    expect(peaks).toHaveLength(2);
    peaks.forEach((peak, rank) => {
      const before = r.rss_before_bytes_by_peer![rank]!;
      expect(before).toBeGreaterThan(0);
      // The tensor is resident through every timed allreduce, so each window holds it on top of what was left of
      // `before`: less only what the process gave back since (V8's start-up heap, up to about 15 MB under Node).
      expect(peak).toBeGreaterThan(bytes);
      expect(peak! - before).toBeGreaterThanOrEqual(bytes / 2);
      // A window's mark restarts from the memory of the moment; the whole run's covers the windows too.
      expect(peak).toBeLessThanOrEqual(r.process_peak_rss_bytes_by_peer![rank]!);
    });
    const over = (peakOf: (number | null)[]) =>
      Math.max(...peakOf.map((p, i) => p! - r.rss_before_bytes_by_peer![i]!)) / bytes;
    expect(r.peak_rss_over_tensor).toBeCloseTo(over(peaks), 2);
    expect(r.process_peak_rss_over_tensor).toBeCloseTo(over(r.process_peak_rss_bytes_by_peer!), 2);
  }, 120_000);

  it('gives no window peak, and says why, where the high-water mark cannot be reset', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ringtrain-proc-'));
    try {
      // A /proc/self with a status but no clear_refs (a kernel before 4.0, or no such file at all).
      writeFileSync(join(dir, 'status'), 'VmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n');
      const noReset = new PeakRssWindows(dir);
      noReset.open();
      noReset.close();
      expect(noReset.report()).toMatchObject({
        window_peak_bytes: null,
        unavailable: expect.stringContaining('clear_refs'),
      });
      expect(noReset.report().process_peak_bytes).toBeGreaterThan(0);
      // No /proc at all (not Linux).
      const noProc = new PeakRssWindows(join(dir, 'absent'));
      noProc.open();
      noProc.close();
      expect(noProc.report()).toMatchObject({
        window_peak_bytes: null,
        unavailable: expect.stringContaining('status'),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("carries a peer's reason into the result when it has no window peak, and keeps the whole-run figure", () => {
    const peer = (rank: number, allreduce: number | null): PeerRss => ({
      rank,
      before_bytes: 100,
      process_peak_bytes: 500,
      allreduce_peak_bytes: allreduce,
      allreduce_peak_unavailable: allreduce === null ? 'cannot reset the high-water mark' : null,
    });
    expect(memoryOf([peer(1, null), peer(0, 300)], 200)).toEqual({
      allreduce_peak_rss_bytes_by_peer: [300, null],
      process_peak_rss_bytes_by_peer: [500, 500],
      rss_before_bytes_by_peer: [100, 100],
      peak_rss_over_tensor: null,
      peak_rss_unavailable: 'rank 1: cannot reset the high-water mark',
      process_peak_rss_over_tensor: 2,
    });
    expect(memoryOf([peer(0, 300), peer(1, 340)], 200)).toMatchObject({ peak_rss_over_tensor: 1.2 });
  });

  it('refuses bad options with InvalidArgument', async () => {
    await expect(benchAllreduce({ peers: 0, bytes: 1024, transport: 'memory', fp16: false })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
    });
    await expect(
      benchAllreduce({ peers: 2, bytes: 1024, transport: 'pigeon' as 'memory', fp16: false }),
    ).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
