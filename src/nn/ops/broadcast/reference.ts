/**
 * The f64 CPU reference of broadcasting: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
import { sizeOfShape, coordsOf } from '../strides.ts';

type Vec = ArrayLike<number>;

/** The broadcast shape (right-aligned), or null when the shapes do not broadcast. */
export function broadcastShapeRef(a: readonly number[], b: readonly number[]): number[] | null {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) return null;
    out.push(Math.max(da, db));
  }
  return out;
}

/** Flat index into an input of `shape` read at output coordinates `c` (broadcast dims read index 0). */
function broadcastIndex(c: readonly number[], shape: readonly number[]): number {
  const off = c.length - shape.length;
  let idx = 0;
  for (let d = 0; d < shape.length; d++) idx = idx * shape[d] + (shape[d] === 1 ? 0 : c[off + d]);
  return idx;
}

export function broadcastBinaryRef(
  op: 'add' | 'mul',
  a: Vec,
  aShape: readonly number[],
  b: Vec,
  bShape: readonly number[],
  alpha = 1,
): Float64Array {
  const shape = broadcastShapeRef(aShape, bShape);
  if (!shape) throw new Error(`shapes [${aShape}] and [${bShape}] do not broadcast`);
  return Float64Array.from({ length: sizeOfShape(shape) }, (_, i) => {
    const c = coordsOf(i, shape);
    const x = a[broadcastIndex(c, aShape)];
    const y = b[broadcastIndex(c, bShape)];
    return op === 'add' ? x + alpha * y : x * y;
  });
}

/** The gradient of an input of `targetShape` broadcast to `shape`: Σ alpha·dy (· other) over the broadcast dims. */
export function broadcastReduceRef(
  dy: Vec,
  shape: readonly number[],
  targetShape: readonly number[],
  alpha = 1,
  other?: { data: Vec; shape: readonly number[] },
): Float64Array {
  const out = new Float64Array(sizeOfShape(targetShape));
  for (let i = 0; i < sizeOfShape(shape); i++) {
    const c = coordsOf(i, shape);
    out[broadcastIndex(c, targetShape)] += alpha * dy[i] * (other ? other.data[broadcastIndex(c, other.shape)] : 1);
  }
  return out;
}
