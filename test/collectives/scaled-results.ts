/** The prescale/postscale results check the middle-size algorithms share (halving-doubling, two-shot): every rank the same bits, each element within tolerance of the float64 reference. */
import { expect } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce } from '../../src/collectives/allreduce.ts';
import type { Algorithm, Tensor } from '../../src/collectives/codecs/types.ts';
import { input, reference, tolerance, valuesOf, type Kind } from './reference.ts';

const bytesOf = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);

export async function expectScaledResults(
  algorithm: Algorithm,
  size: number,
  kind: Kind,
  op: 'sum' | 'average',
  count: number,
  prescale: number,
  postscale: number,
): Promise<void> {
  const comms = createMemoryRing(size);
  const inputs = comms.map((_, r) => input(kind, op, count, r, 3));
  const out = await Promise.all(
    comms.map((c, r) =>
      allreduce(c, inputs[r], {
        op,
        prescale,
        postscale,
        algorithm,
        compression: kind === 'fp16' ? 'fp16' : 'none',
        segmentBytes: 64,
      }),
    ),
  );
  comms.forEach((c) => c.close());
  const where = `${algorithm} size=${size} ${kind} ${op} count=${count} prescale=${prescale} postscale=${postscale}`;
  for (const o of out) expect(Buffer.compare(bytesOf(o), bytesOf(out[0])), where).toBe(0);
  const ref = reference(op, inputs, prescale, postscale);
  const got = valuesOf(out[0]);
  for (let i = 0; i < count; i++) {
    const tol = tolerance(kind, op, inputs, i, ref[i], prescale * postscale);
    expect(Math.abs(got[i] - ref[i]), `${where}: element ${i} is ${got[i]}, reference ${ref[i]}`).toBeLessThanOrEqual(
      tol,
    );
  }
}
