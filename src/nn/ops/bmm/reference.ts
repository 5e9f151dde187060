/**
 * The f64 CPU reference of batched matmul: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
import type { BmmShape } from './kernel.ts';

type Vec = ArrayLike<number>;

/** The kernel's shape; accumulating is the kernel's business, not the product's. */
export type BmmRefShape = Omit<BmmShape, 'accumulate'>;

export function bmmRef(a: Vec, b: Vec, s: BmmRefShape): Float64Array {
  const c = new Float64Array(s.batch * s.m * s.n);
  for (let e = 0; e < s.batch; e++) {
    const a0 = s.broadcastA ? 0 : e * s.m * s.k;
    const b0 = s.broadcastB ? 0 : e * s.k * s.n;
    for (let i = 0; i < s.m; i++)
      for (let j = 0; j < s.n; j++) {
        let acc = 0;
        for (let q = 0; q < s.k; q++)
          acc += a[a0 + (s.transA ? q * s.m + i : i * s.k + q)] * b[b0 + (s.transB ? j * s.k + q : q * s.n + j)];
        c[e * s.m * s.n + i * s.n + j] = acc;
      }
  }
  return c;
}

/** dA and dB of C = op(A)·op(B) from dC, in A's and B's stored layouts; a shared (broadcast) operand sums over the batch. */
export function bmmBackwardRef(a: Vec, b: Vec, dc: Vec, s: BmmRefShape): { da: Float64Array; db: Float64Array } {
  const da = new Float64Array((s.broadcastA ? 1 : s.batch) * s.m * s.k);
  const db = new Float64Array((s.broadcastB ? 1 : s.batch) * s.k * s.n);
  for (let e = 0; e < s.batch; e++) {
    const a0 = s.broadcastA ? 0 : e * s.m * s.k;
    const b0 = s.broadcastB ? 0 : e * s.k * s.n;
    for (let i = 0; i < s.m; i++)
      for (let j = 0; j < s.n; j++) {
        const g = dc[e * s.m * s.n + i * s.n + j];
        for (let q = 0; q < s.k; q++) {
          const ai = a0 + (s.transA ? q * s.m + i : i * s.k + q);
          const bi = b0 + (s.transB ? j * s.k + q : q * s.n + j);
          da[ai] += g * b[bi];
          db[bi] += g * a[ai];
        }
      }
  }
  return { da, db };
}
