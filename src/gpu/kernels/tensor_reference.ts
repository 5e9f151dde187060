/**
 * CPU references (float64, plain loops) for the tensor-shuffling and generic
 * kernels: batched matmul, broadcasting add/mul and its gradient reduction,
 * permute / slice / concat, and MSE. Oracles for the WGSL kernels and the
 * `cpu` half of the ops in src/nn/ops.
 */

type Vec = ArrayLike<number>;

export function sizeOfShape(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

/** The coordinates of flat index i in a row-major array of `shape`. */
function coordsOf(i: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    c[d] = i % shape[d];
    i = Math.floor(i / shape[d]);
  }
  return c;
}

// ---- batched matmul -------------------------------------------------------------------------------

export interface BmmRefShape {
  batch: number;
  m: number;
  n: number;
  k: number;
  transA?: boolean;
  transB?: boolean;
  broadcastA?: boolean;
  broadcastB?: boolean;
}

export function bmmRef(a: Vec, b: Vec, s: BmmRefShape): Float64Array {
  const c = new Float64Array(s.batch * s.m * s.n);
  for (let e = 0; e < s.batch; e++) {
    const a0 = s.broadcastA ? 0 : e * s.m * s.k;
    const b0 = s.broadcastB ? 0 : e * s.k * s.n;
    for (let i = 0; i < s.m; i++)
      for (let j = 0; j < s.n; j++) {
        let acc = 0;
        for (let q = 0; q < s.k; q++) acc += a[a0 + (s.transA ? q * s.m + i : i * s.k + q)] * b[b0 + (s.transB ? j * s.k + q : q * s.n + j)];
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

// ---- broadcasting ---------------------------------------------------------------------------------

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

export function broadcastBinaryRef(op: 'add' | 'mul', a: Vec, aShape: readonly number[], b: Vec, bShape: readonly number[], alpha = 1): Float64Array {
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
export function broadcastReduceRef(dy: Vec, shape: readonly number[], targetShape: readonly number[], alpha = 1, other?: { data: Vec; shape: readonly number[] }): Float64Array {
  const out = new Float64Array(sizeOfShape(targetShape));
  for (let i = 0; i < sizeOfShape(shape); i++) {
    const c = coordsOf(i, shape);
    out[broadcastIndex(c, targetShape)] += alpha * dy[i] * (other ? other.data[broadcastIndex(c, other.shape)] : 1);
  }
  return out;
}

// ---- permute, slice, concat -----------------------------------------------------------------------

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
export function sliceBackwardRef(dy: Vec, shape: readonly number[], axis: number, start: number, length: number): Float64Array {
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

// ---- mean squared error ---------------------------------------------------------------------------

export function mseRef(pred: Vec, target: Vec): { loss: number; dpred: Float64Array } {
  const n = pred.length;
  let s = 0;
  for (let i = 0; i < n; i++) s += (pred[i] - target[i]) ** 2;
  return { loss: s / n, dpred: Float64Array.from(pred, (p, i) => (2 * (p - target[i])) / n) };
}
