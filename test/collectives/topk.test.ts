/**
 * Top-k sparsification with error feedback: the selection against a float64
 * oracle, the allreduce over the memory transport against the sum of every
 * rank's sparse vector, the bytes it saves, and the property error feedback
 * is for: what was sent plus what is still held is what was meant to be sent.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, allreduceInPlace } from '../../src/collectives/allreduce.ts';
import { topkCount, topkIndices, topkRatio } from '../../src/collectives/transfer/topk.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { mulberry32 } from '../../src/core/random.ts';

/** Gradient-like values (magnitudes over four decades), with some exact ties. */
function draws(n: number, seed: number): Float32Array {
  const r = mulberry32(seed);
  return Float32Array.from({ length: n }, (_, i) => (i % 17 === 3 ? 0.5 : (r() * 2 - 1) * 10 ** (r() * 4 - 3)));
}

/** Oracle: positions ordered by |x| descending (non-finite first), then by index; the first k, ascending. */
function oracleTopk(x: Float32Array, k: number): number[] {
  const mag = (v: number) => (Number.isFinite(v) ? Math.abs(v) : Infinity);
  return Array.from(x.keys())
    .sort((a, b) => mag(x[b]) - mag(x[a]) || a - b)
    .slice(0, k)
    .sort((a, b) => a - b);
}

describe('top-k selection', () => {
  it('picks the k largest magnitudes, ties to the lower index, a non-finite value first', () => {
    for (const [n, k] of [
      [0, 0],
      [1, 1],
      [50, 5],
      [1000, 10],
      [1000, 1000],
      [3001, 31],
    ]) {
      const x = draws(n, n + k);
      expect(Array.from(topkIndices(x, k)), `n=${n} k=${k}`).toEqual(oracleTopk(x, k));
    }
    // Mostly zeros (k beyond the non-zeros), all equal, and -0 beside 0: ties fall to the lowest indices.
    const sparse = new Float32Array(500);
    sparse[7] = -3;
    sparse[400] = 2;
    sparse[401] = -0;
    expect(Array.from(topkIndices(sparse, 5))).toEqual([0, 1, 2, 7, 400]);
    expect(Array.from(topkIndices(new Float32Array(64).fill(0.25), 10))).toEqual(
      oracleTopk(new Float32Array(64).fill(0.25), 10),
    );
    const x = draws(100, 9);
    x[42] = NaN;
    expect(Array.from(topkIndices(x, 3))).toContain(42);
  });

  it('parses topk:R and refuses a ratio outside (0, 1]', () => {
    expect(topkRatio('topk:0.01')).toBe(0.01);
    expect(topkRatio('int8')).toBeNull();
    for (const bad of ['topk:0', 'topk:-1', 'topk:2', 'topk:', 'topk:x'])
      expect(() => topkRatio(bad), bad).toThrow(/top-k ratio must be a number in \(0, 1\]/);
    expect(topkCount(0, 0.01)).toBe(0);
    expect(topkCount(10, 0.01)).toBe(1);
    expect(topkCount(1000, 0.01)).toBe(10);
  });
});

describe('top-k allreduce (memory transport)', () => {
  for (const size of [1, 2, 3, 4]) {
    for (const count of [0, 1, 7, 1000]) {
      it(`N=${size}, ${count} elements: every rank gets the sum of each rank's top-k, bitwise equal`, async () => {
        const ratio = 0.05;
        const comms = createMemoryRing(size);
        const inputs = comms.map((_, r) => draws(count, 31 * size + r));
        const out = await Promise.all(
          comms.map((c, r) => allreduce(c, inputs[r], { name: 'g', compression: `topk:${ratio}` })),
        );
        comms.forEach((c) => c.close());
        const k = topkCount(count, ratio);
        const expected = new Float64Array(count);
        for (const x of inputs) for (const i of oracleTopk(x, k)) expected[i] += x[i];
        for (const o of out.slice(1)) expect(Array.from(o)).toEqual(Array.from(out[0]));
        for (let i = 0; i < count; i++)
          expect(Math.abs(out[0][i] - expected[i])).toBeLessThanOrEqual(1e-6 * Math.abs(expected[i]) + 1e-12);
      });
    }
  }

  it('topk:1 is the plain sum; topk:0.01 sends over 10x fewer bytes than float32 on 4 ranks', async () => {
    const size = 4;
    const count = 20_000;
    const comms = createMemoryRing(size);
    const inputs = comms.map((_, r) => draws(count, 500 + r));
    const dense = await Promise.all(
      comms.map((c, r) => allreduce(c, inputs[r], { name: 'all', op: 'average', compression: 'topk:1' })),
    );
    const mark = comms.map((c) => c.stats.bytesSent);
    await Promise.all(comms.map((c, r) => allreduce(c, inputs[r], { name: 'f32', op: 'average' })));
    const f32 = comms.map((c, r) => c.stats.bytesSent - mark[r]);
    const mark2 = comms.map((c) => c.stats.bytesSent);
    await Promise.all(
      comms.map((c, r) => allreduce(c, inputs[r], { name: 'sparse', op: 'average', compression: 'topk:0.01' })),
    );
    const sparse = comms.map((c, r) => c.stats.bytesSent - mark2[r]);
    comms.forEach((c) => c.close());
    for (let i = 0; i < count; i++) expect(dense[0][i]).toBeCloseTo(inputs.reduce((a, x) => a + x[i], 0) / size, 5);
    for (let r = 0; r < size; r++)
      expect(f32[r] / sparse[r], `rank ${r}: ${f32[r]} vs ${sparse[r]} bytes`).toBeGreaterThan(10);
  });

  it('error feedback: results summed over steps plus what each rank still holds equal the inputs summed (N=3, 100 steps)', async () => {
    const size = 3;
    const count = 2000;
    const comms = createMemoryRing(size);
    const residuals = comms.map(() => new Float32Array(count));
    const exact = new Float64Array(count);
    const delivered = new Float64Array(count);
    const plain = new Float64Array(count);
    for (let t = 0; t < 100; t++) {
      const inputs = comms.map((_, r) => draws(count, 7000 + 10 * t + r));
      for (const x of inputs) for (let i = 0; i < count; i++) exact[i] += x[i];
      const fed = await Promise.all(
        comms.map((c, r) =>
          allreduceInPlace(c, inputs[r].slice(), {
            name: 'fed',
            compression: 'topk:0.02',
            errorFeedback: residuals[r],
          }),
        ),
      );
      const lost = await Promise.all(
        comms.map((c, r) => allreduceInPlace(c, inputs[r].slice(), { name: 'lossy', compression: 'topk:0.02' })),
      );
      for (let i = 0; i < count; i++) {
        delivered[i] += fed[0][i];
        plain[i] += lost[0][i];
      }
    }
    comms.forEach((c) => c.close());
    let fedErr = 0;
    let plainErr = 0;
    for (let i = 0; i < count; i++) {
      const held = residuals.reduce((a, r) => a + r[i], 0);
      expect(Math.abs(delivered[i] + held - exact[i])).toBeLessThan(1e-3);
      fedErr += Math.abs(delivered[i] - exact[i]);
      plainErr += Math.abs(plain[i] - exact[i]);
    }
    // Without feedback the small values are never sent at all.
    expect(fedErr * 3).toBeLessThan(plainErr);
  });

  it('refuses a bad ratio, a non-float32 tensor and recursive doubling, naming them', async () => {
    const [c] = createMemoryRing(1);
    await expect(allreduce(c, new Float32Array(4), { compression: 'topk:1.5' })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringMatching(/topk:1\.5/),
    });
    await expect(allreduce(c, new Int32Array(4), { compression: 'topk:0.5' })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringMatching(/float32 tensors only/),
    });
    await expect(
      allreduce(c, new Float32Array(4), { compression: 'topk:0.5', algorithm: 'recursive-doubling' }),
    ).rejects.toMatchObject({ code: ErrorCode.InvalidArgument, message: expect.stringMatching(/ring only/) });
    c.close();
  });
});
