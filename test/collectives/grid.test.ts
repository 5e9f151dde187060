/**
 * The gloo-style grid: ranks x element counts x ops x dtypes over the memory
 * transport, each result checked against a float64 reference, with a tiny
 * segment size so that every multi-segment path runs even on small inputs.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce } from '../../src/collectives/allreduce.ts';
import { REDUCE_OPS, type ReduceOp, type Tensor } from '../../src/collectives/types.ts';
import { input, reference, tolerance, type Kind } from './reference.ts';

const KINDS: Kind[] = ['float32', 'int32', 'fp16'];
const COUNTS = [0, 1, 3, 100, 1000, 65537];

async function check(size: number, count: number, op: ReduceOp, kind: Kind, segmentBytes: number): Promise<void> {
  const comms = createMemoryRing(size);
  const inputs = comms.map((_, r) => input(kind, op, count, r));
  const results = await Promise.all(
    comms.map((c, r) => allreduce(c, inputs[r], { name: 'grid', op, segmentBytes, compression: kind === 'fp16' ? 'fp16' : 'none' })),
  );
  comms.forEach((c) => c.close());
  const ref = reference(op, inputs);
  const where = `size=${size} count=${count} op=${op} kind=${kind}`;
  for (const res of results) {
    expect(res.length, where).toBe(count);
    expect(res.constructor, where).toBe(inputs[0].constructor);
  }
  // Every rank ends with bitwise the same tensor (the optimizer depends on it).
  const bytes = (t: Tensor) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
  for (const res of results.slice(1)) expect(Buffer.compare(bytes(res), bytes(results[0])), where).toBe(0);
  const got = results[0];
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < count; i++) {
    const over = Math.abs(got[i] - ref[i]) - tolerance(kind, op, inputs, i, ref[i]);
    if (over > worst) {
      worst = over;
      worstAt = i;
    }
  }
  expect(worstAt, `${where}: element ${worstAt} is ${got[worstAt]}, reference ${ref[worstAt]}`).toBe(-1);
}

describe('allreduce grid over memory links', () => {
  for (let size = 1; size <= 8; size++) {
    it(`${size} rank(s): every count, op and dtype`, async () => {
      for (const count of COUNTS) {
        // Small counts: 8-byte segments (2 floats). Larger: keep message counts sane but still many segments per chunk.
        const segmentBytes = count <= 1000 ? 8 : 4096;
        for (const op of REDUCE_OPS) for (const kind of KINDS) await check(size, count, op, kind, segmentBytes);
      }
    });
  }

  it('1000003 elements for 2, 3 and 8 ranks (sum, max, average)', async () => {
    for (const size of [2, 3, 8]) {
      for (const [op, kind] of [['sum', 'float32'], ['max', 'int32'], ['average', 'fp16']] as const) {
        await check(size, 1_000_003, op, kind, 65536);
      }
    }
  });
});
