/** The benchmark's bookkeeping (not its speed): fields, units and the nccl-tests busbw formula. */
import { describe, expect, it } from 'vitest';
import { benchAllreduce, parseBytes } from '../../src/cli/bench-allreduce.node.ts';

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
    expect(r.seconds.length).toBe(2);
    expect(r.algbw_MBps).toBeGreaterThan(0);
    expect(r.busbw_MBps).toBeCloseTo((r.algbw_MBps * 2 * 2) / 3, 1);
    expect(r.p2p_MBps).toBeGreaterThan(0);
    expect(r.ratio).toBeCloseTo(r.busbw_MBps / r.p2p_MBps!, 2);
    expect(r.ratio_bidir).toBeCloseTo(r.busbw_MBps / r.p2p_bidir_MBps!, 2);
    expect(r.fp16_speedup).toBeUndefined();
  });

  it('times float32 beside fp16 in the same run and reports the speed-up', async () => {
    const r = await benchAllreduce({ peers: 2, bytes: 64 * 1024, transport: 'memory', fp16: true, iterations: 2 });
    expect(r.fp16).toBe(true);
    expect(r.f32_algbw_MBps).toBeGreaterThan(0);
    expect(r.fp16_speedup).toBeCloseTo(r.algbw_MBps / r.f32_algbw_MBps!, 1);
  });

  it('refuses bad options with InvalidArgument', async () => {
    await expect(benchAllreduce({ peers: 0, bytes: 1024, transport: 'memory', fp16: false })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(benchAllreduce({ peers: 2, bytes: 1024, transport: 'pigeon' as 'memory', fp16: false })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
