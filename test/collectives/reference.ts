/** Plain, obviously-right references and seeded inputs for the collective tests. */
import type { ReduceOp, Tensor } from '../../src/collectives/types.ts';
import { mulberry32 } from '../../src/core/random.ts';

/** Seeded test data: the project's one generator. */
export const rng = mulberry32;

export type Kind = 'float32' | 'int32' | 'fp16';

/** Rank `rank`'s input: products get values near 1 (or small ints) so they stay finite. */
export function input(kind: Kind, op: ReduceOp, count: number, rank: number, seed = 1): Tensor {
  const r = rng(seed * 7919 + rank * 104729 + count);
  if (kind === 'int32') {
    const t = new Int32Array(count);
    for (let i = 0; i < count; i++) t[i] = op === 'product' ? Math.floor(r() * 7) - 3 : Math.floor(r() * 2_000_001) - 1_000_000;
    return t;
  }
  const t = new Float32Array(count);
  for (let i = 0; i < count; i++) t[i] = op === 'product' ? 0.5 + r() : r() * 2 - 1;
  return t;
}

/** Element-wise reduction in float64 (int32 with wrap-around), then average/scale. */
export function reference(op: ReduceOp, inputs: Tensor[], prescale = 1, postscale = 1): Float64Array {
  const n = inputs[0].length;
  const isInt = inputs[0] instanceof Int32Array;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let acc = inputs[0][i] * prescale;
    for (let r = 1; r < inputs.length; r++) {
      const v = inputs[r][i] * prescale;
      if (op === 'sum' || op === 'average') acc = isInt ? (acc + v) | 0 : acc + v;
      else if (op === 'product') acc = isInt ? Math.imul(acc, v) : acc * v;
      else if (op === 'min') acc = Math.min(acc, v);
      else acc = Math.max(acc, v);
    }
    if (op === 'average') acc = isInt ? Math.trunc(acc / inputs.length) : acc / inputs.length;
    out[i] = isInt ? acc : acc * postscale;
  }
  return out;
}

/**
 * How far a result may be from the float64 reference: int32 and min/max of
 * plain floats exactly; sums within a few ulps of the magnitudes involved;
 * fp16 within half precision per ring step.
 */
export function tolerance(kind: Kind, op: ReduceOp, inputs: Tensor[], i: number, ref: number, scale = 1): number {
  if (kind === 'int32') return 0;
  const size = inputs.length;
  const eps = kind === 'fp16' ? 2 ** -10 : 2 ** -22;
  // fp16 subnormals are spaced 2^-24 apart whatever the magnitude.
  const floor = kind === 'fp16' ? 2 ** -24 * (size + 1) : 0;
  if (op === 'min' || op === 'max') return kind === 'fp16' ? Math.abs(ref) * eps + floor : 0;
  if (op === 'product') return Math.abs(ref) * eps * (size + 1) * 2 + floor;
  let mag = 0;
  for (const t of inputs) mag += Math.abs(t[i]);
  return mag * Math.abs(scale) * eps * (size + 1) + floor + 1e-30;
}
