/**
 * Row-major index arithmetic the f64 references of the tensor ops share
 * (broadcasting, permute, slice, concat).
 */

export function sizeOfShape(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/** The coordinates of flat index i in a row-major array of `shape`. */
export function coordsOf(i: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    c[d] = i % shape[d];
    i = Math.floor(i / shape[d]);
  }
  return c;
}
