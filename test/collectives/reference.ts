/** Plain, obviously-right references and seeded inputs for the collective tests. */
import { float16ToFloat32, float32ToFloat16 } from '../../src/collectives/codecs/fp16.ts';
import type { ReduceOp, Tensor } from '../../src/collectives/codecs/types.ts';
import { mulberry32 } from '../../src/core/random.ts';

/** Seeded test data: the project's one generator. */
export const rng = mulberry32;

/** float32/int32/float16/int8 are dtypes; fp16 is float32 data with fp16 wire compression. */
export type Kind = 'float32' | 'int32' | 'fp16' | 'float16' | 'int8';

const isInt = (k: Kind) => k === 'int32' || k === 'int8';
const wrap8 = (x: number) => (x << 24) >> 24;

/** Rank `rank`'s input: products get values near 1 (or small ints) so they stay finite. */
export function input(kind: Kind, op: ReduceOp, count: number, rank: number, seed = 1): Tensor {
  const r = rng(seed * 7919 + rank * 104729 + count);
  if (kind === 'int32') {
    const t = new Int32Array(count);
    for (let i = 0; i < count; i++)
      t[i] = op === 'product' ? Math.floor(r() * 7) - 3 : Math.floor(r() * 2_000_001) - 1_000_000;
    return t;
  }
  if (kind === 'int8') {
    const t = new Int8Array(count);
    for (let i = 0; i < count; i++) t[i] = op === 'product' ? Math.floor(r() * 5) - 2 : Math.floor(r() * 256) - 128;
    return t;
  }
  const t = new Float32Array(count);
  for (let i = 0; i < count; i++) t[i] = op === 'product' ? 0.5 + r() : r() * 2 - 1;
  return kind === 'float16' ? float32ToFloat16(t) : t;
}

const widened = new WeakMap<Tensor, Float32Array>();

/** The numbers a tensor holds (float16 bit patterns widened, once per tensor). */
export function valuesOf(t: Tensor): ArrayLike<number> {
  if (!(t instanceof Uint16Array)) return t;
  let w = widened.get(t);
  if (!w) widened.set(t, (w = float16ToFloat32(t)));
  return w;
}

/**
 * Element-wise reduction in float64 (integers with their wrap-around, and
 * scaled as Horovod does: in float64, truncated), then average/scale.
 */
export function reference(op: ReduceOp, inputs: Tensor[], prescale = 1, postscale = 1): Float64Array {
  const n = inputs[0].length;
  const int = inputs[0] instanceof Int32Array || inputs[0] instanceof Int8Array;
  const fit = inputs[0] instanceof Int8Array ? wrap8 : (x: number) => x | 0;
  const values = inputs.map(valuesOf);
  const scaled = (x: number, f: number) => (int ? fit(Math.trunc(x * f)) : x * f);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let acc = scaled(values[0][i], prescale);
    for (let r = 1; r < values.length; r++) {
      const v = scaled(values[r][i], prescale);
      if (op === 'sum' || op === 'average') acc = int ? fit(acc + v) : acc + v;
      else if (op === 'product') acc = int ? fit(Math.imul(acc, v)) : acc * v;
      else if (op === 'min') acc = Math.min(acc, v);
      else acc = Math.max(acc, v);
    }
    if (int) {
      acc = scaled(acc, postscale);
      if (op === 'average') acc = Math.trunc(acc / inputs.length);
    } else {
      acc = op === 'average' ? (acc * postscale) / inputs.length : acc * postscale;
    }
    out[i] = acc;
  }
  return out;
}

/**
 * How far a result may be from the float64 reference: integers and min/max of
 * plain floats exactly; sums within a few ulps of the magnitudes involved;
 * half precision (fp16 on the wire, float16 tensors) within a half ulp per step.
 */
export function tolerance(kind: Kind, op: ReduceOp, inputs: Tensor[], i: number, ref: number, scale = 1): number {
  if (isInt(kind)) return 0;
  const size = inputs.length;
  const half = kind === 'fp16' || kind === 'float16';
  const eps = half ? 2 ** -10 : 2 ** -22;
  // Half subnormals are spaced 2^-24 apart whatever the magnitude.
  const floor = half ? 2 ** -24 * (size + 1) : 0;
  if (op === 'min' || op === 'max') return kind === 'fp16' ? Math.abs(ref) * eps + floor : 0;
  if (op === 'product') return Math.abs(ref) * eps * (size + 1) * 2 + floor;
  let mag = 0;
  for (const t of inputs) mag += Math.abs(valuesOf(t)[i]);
  return mag * Math.abs(scale) * eps * (size + 1) + floor + 1e-30;
}
