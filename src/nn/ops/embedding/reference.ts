/**
 * The f64 CPU reference of embedding: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

export function embeddingRef(ids: Vec, weight: Vec, rows: number, dim: number): Float64Array {
  const out = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) for (let c = 0; c < dim; c++) out[r * dim + c] = weight[ids[r] * dim + c];
  return out;
}

export function embeddingBackwardRef(ids: Vec, dy: Vec, rows: number, vocab: number, dim: number): Float64Array {
  const dw = new Float64Array(vocab * dim);
  for (let r = 0; r < rows; r++) for (let c = 0; c < dim; c++) dw[ids[r] * dim + c] += dy[r * dim + c];
  return dw;
}
