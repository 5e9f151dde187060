/**
 * int8 compression with error feedback: the codec against a float64 oracle,
 * and the property error feedback exists for: summed over many steps, what
 * the ring delivers converges to what an uncompressed ring delivers (the
 * difference stays one residual, while without feedback it grows with the
 * number of steps).
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, allreduceInPlace } from '../../src/collectives/allreduce.ts';
import {
  dequantizeInt8,
  encodeWithFeedback,
  INT8_HEADER_BYTES,
  quantizeInt8,
} from '../../src/collectives/codecs/int8.ts';
import { ErrorCode } from '../../src/core/errors.ts';

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Values of very different sizes, as gradients have: a uniform draw times 10^(-3..1). */
function draws(n: number, seed: number): Float32Array {
  const r = lcg(seed);
  return Float32Array.from({ length: n }, () => (r() * 2 - 1) * 10 ** (r() * 4 - 3));
}

describe('int8 codec', () => {
  it('matches a float64 oracle: scale = max|x|/127, q = round(x/scale), within half a step', () => {
    const x = draws(1000, 1);
    const payload = quantizeInt8(x);
    expect(payload.byteLength).toBe(INT8_HEADER_BYTES + x.length);
    const max = x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const scale = Math.fround(max / 127);
    const q = new Int8Array(payload.buffer, INT8_HEADER_BYTES, x.length);
    const back = dequantizeInt8(payload);
    for (let i = 0; i < x.length; i++) {
      expect(q[i]).toBe(Math.round(x[i] / scale) || 0); // Int8Array has no -0
      expect(Math.abs(back[i] - x[i])).toBeLessThanOrEqual(scale / 2 + 1e-6 * scale);
    }
    // The largest magnitude is exact (±127 steps of its own scale) up to float32 rounding.
    const at = x.findIndex((v) => Math.abs(v) === max);
    expect(Math.abs(q[at])).toBe(127);
  });

  it('encodes zeros as zeros and a non-finite value as NaN everywhere (never a plausible number)', () => {
    expect(Array.from(dequantizeInt8(quantizeInt8(new Float32Array(5))))).toEqual([0, 0, 0, 0, 0]);
    for (const bad of [NaN, Infinity, -Infinity]) {
      const back = dequantizeInt8(quantizeInt8(Float32Array.of(1, bad, 2)));
      expect(back.every(Number.isNaN), String(bad)).toBe(true);
    }
  });

  it('decodes a payload at any byte offset (data channels may deliver unaligned)', () => {
    const x = draws(33, 2);
    const payload = quantizeInt8(x);
    const shifted = new Uint8Array(payload.byteLength + 3);
    shifted.set(payload, 3);
    expect(Array.from(dequantizeInt8(shifted.subarray(3)))).toEqual(Array.from(dequantizeInt8(payload)));
  });

  it('error feedback: the sum of what was decoded over T sends is the true sum less the last residual', () => {
    const n = 200;
    const residual = new Float32Array(n);
    const trueSum = new Float64Array(n);
    const sentSum = new Float64Array(n);
    const plainSum = new Float64Array(n);
    for (let t = 0; t < 300; t++) {
      const x = draws(n, 100 + t);
      for (let i = 0; i < n; i++) trueSum[i] += x[i];
      const plain = dequantizeInt8(quantizeInt8(x));
      for (let i = 0; i < n; i++) plainSum[i] += plain[i];
      const v = x.slice();
      encodeWithFeedback(v, residual, quantizeInt8, (p, into) => void dequantizeInt8(p, into));
      for (let i = 0; i < n; i++) sentSum[i] += v[i];
    }
    let withFeedback = 0;
    let without = 0;
    for (let i = 0; i < n; i++) {
      // The telescoping identity, up to float32 rounding of the running residual.
      expect(Math.abs(sentSum[i] + residual[i] - trueSum[i])).toBeLessThan(1e-3);
      withFeedback = Math.max(withFeedback, Math.abs(sentSum[i] - trueSum[i]));
      without = Math.max(without, Math.abs(plainSum[i] - trueSum[i]));
    }
    // Without feedback the small values (rounded to 0 beside a large one) are simply lost.
    expect(withFeedback * 20).toBeLessThan(without);
  });
});

describe('int8 allreduce over the ring (memory transport)', () => {
  for (const size of [1, 2, 3, 4]) {
    it(`N=${size}: every rank ends bitwise equal, within the quantisation error of the float64 sum, a quarter of the bytes`, async () => {
      const count = 40_000;
      const comms = createMemoryRing(size);
      const inputs = comms.map((_, r) => draws(count, 7 + r));
      const before = comms.map((c) => c.stats.bytesSent);
      const out = await Promise.all(
        comms.map((c, r) =>
          allreduce(c, inputs[r], { name: 'q', op: 'average', compression: 'int8', segmentBytes: 16 * 1024 }),
        ),
      );
      const int8Bytes = comms.map((c, r) => c.stats.bytesSent - before[r]);
      const rawBytes = comms.map((c) => c.stats.bytesSent);
      await Promise.all(
        comms.map((c, r) => allreduce(c, inputs[r], { name: 'raw', op: 'average', segmentBytes: 16 * 1024 })),
      );
      const f32Bytes = comms.map((c, r) => c.stats.bytesSent - rawBytes[r]);
      comms.forEach((c) => c.close());
      for (const o of out.slice(1)) expect(Array.from(o)).toEqual(Array.from(out[0]));
      const maxAbs = Math.max(...inputs.map((x) => x.reduce((m, v) => Math.max(m, Math.abs(v)), 0)));
      for (let i = 0; i < count; i++) {
        const exact = inputs.reduce((a, x) => a + x[i], 0) / size;
        // Each of the (size-1) hops plus the allgather rounds a partial sum by at most half its step.
        expect(Math.abs(out[0][i] - exact)).toBeLessThanOrEqual((size * maxAbs * size) / 127);
      }
      if (size > 1) for (let r = 0; r < size; r++) expect(int8Bytes[r] / f32Bytes[r]).toBeLessThan(0.3);
    });
  }

  it('with error feedback the running sum of results converges to the uncompressed one (N=3, 200 steps)', async () => {
    const size = 3;
    const count = 3001;
    const comms = createMemoryRing(size);
    const residuals = comms.map(() => new Float32Array(count));
    const exactSum = new Float64Array(count);
    const fedSum = new Float64Array(count);
    const plainSum = new Float64Array(count);
    const steps = 200;
    for (let t = 0; t < steps; t++) {
      const inputs = comms.map((_, r) => draws(count, 1000 * t + r));
      for (let i = 0; i < count; i++) exactSum[i] += inputs.reduce((a, x) => a + x[i], 0) / size;
      const fed = await Promise.all(
        comms.map((c, r) =>
          allreduceInPlace(c, inputs[r].slice(), {
            name: 'g',
            op: 'average',
            compression: 'int8',
            errorFeedback: residuals[r],
            segmentBytes: 512,
            chunkBytes: 4000,
          }),
        ),
      );
      const plain = await Promise.all(
        comms.map((c, r) =>
          allreduceInPlace(c, inputs[r].slice(), {
            name: 'p',
            op: 'average',
            compression: 'int8',
            segmentBytes: 512,
            chunkBytes: 4000,
          }),
        ),
      );
      for (const f of fed.slice(1)) expect(Array.from(f)).toEqual(Array.from(fed[0]));
      for (let i = 0; i < count; i++) {
        fedSum[i] += fed[0][i];
        plainSum[i] += plain[0][i];
      }
    }
    comms.forEach((c) => c.close());
    let fedErr = 0;
    let plainErr = 0;
    for (let i = 0; i < count; i++) {
      fedErr += Math.abs(fedSum[i] - exactSum[i]);
      plainErr += Math.abs(plainSum[i] - exactSum[i]);
    }
    // One step's error is up to about max|x|·N/127 ≈ 0.24 here; summed over 200 steps it stays below that with feedback.
    expect(fedErr / count).toBeLessThan(0.02);
    expect(fedErr * 10).toBeLessThan(plainErr);
  });

  it('refuses what it cannot do, naming the fix', async () => {
    const [c] = createMemoryRing(1);
    await expect(allreduce(c, new Int32Array(4), { compression: 'int8' })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('float32 tensors only'),
    });
    await expect(
      allreduce(c, new Float32Array(4), { compression: 'int8', algorithm: 'recursive-doubling' }),
    ).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining("use algorithm 'ring'"),
    });
    await expect(
      allreduce(c, new Float32Array(4), { compression: 'int8', errorFeedback: new Float32Array(3) }),
    ).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('as long as the tensor (4)'),
    });
    await expect(allreduce(c, new Float32Array(4), { errorFeedback: new Float32Array(4) })).rejects.toMatchObject({
      code: ErrorCode.InvalidArgument,
      message: expect.stringContaining('lossy compression'),
    });
    c.close();
  });
});
