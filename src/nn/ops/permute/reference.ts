/**
 * The f64 CPU reference of permute, slice, concat: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
import { sizeOfShape, stridesOf, coordsOf } from '../strides.ts';

type Vec = ArrayLike<number>;

export function permuteRef(x: Vec, shape: readonly number[], perm: readonly number[]): Float64Array {
  const outShape = perm.map((d) => shape[d]);
  const inStrides = stridesOf(shape);
  return Float64Array.from({ length: sizeOfShape(shape) }, (_, i) => {
    const c = coordsOf(i, outShape);
    return x[c.reduce((s, v, d) => s + v * inStrides[perm[d]], 0)];
  });
}

/** x[..., start:start+length, ...] along `axis`. */
export function sliceRef(x: Vec, shape: readonly number[], axis: number, start: number, length: number): Float64Array {
  const outShape = shape.map((d, i) => (i === axis ? length : d));
  const inStrides = stridesOf(shape);
  return Float64Array.from({ length: sizeOfShape(outShape) }, (_, i) => {
    const c = coordsOf(i, outShape);
    c[axis] += start;
    return x[c.reduce((s, v, d) => s + v * inStrides[d], 0)];
  });
}

/** The gradient of a slice: dy placed in its window of a zero tensor of `shape`. */
export function sliceBackwardRef(
  dy: Vec,
  shape: readonly number[],
  axis: number,
  start: number,
  length: number,
): Float64Array {
  const out = new Float64Array(sizeOfShape(shape));
  const partShape = shape.map((d, i) => (i === axis ? length : d));
  const strides = stridesOf(shape);
  for (let i = 0; i < dy.length; i++) {
    const c = coordsOf(i, partShape);
    c[axis] += start;
    out[c.reduce((s, v, d) => s + v * strides[d], 0)] = dy[i];
  }
  return out;
}

export function concatRef(parts: { data: Vec; shape: readonly number[] }[], axis: number): Float64Array {
  const outShape = parts[0].shape.map((d, i) => (i === axis ? parts.reduce((s, p) => s + p.shape[axis], 0) : d));
  const out = new Float64Array(sizeOfShape(outShape));
  const strides = stridesOf(outShape);
  let start = 0;
  for (const p of parts) {
    for (let i = 0; i < p.data.length; i++) {
      const c = coordsOf(i, p.shape);
      c[axis] += start;
      out[c.reduce((s, v, d) => s + v * strides[d], 0)] = p.data[i];
    }
    start += p.shape[axis];
  }
  return out;
}
