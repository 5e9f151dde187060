/**
 * The f64 CPU reference of row softmax: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

export function softmaxRef(x: Vec, rows: number, cols: number): Float64Array {
  const y = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, x[r * cols + c]);
    let s = 0;
    for (let c = 0; c < cols; c++) s += Math.exp(x[r * cols + c] - m);
    for (let c = 0; c < cols; c++) y[r * cols + c] = Math.exp(x[r * cols + c] - m) / s;
  }
  return y;
}

/** dx from the softmax output y and dy. */
export function softmaxBackwardRef(y: Vec, dy: Vec, rows: number, cols: number): Float64Array {
  const dx = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += dy[r * cols + c] * y[r * cols + c];
    for (let c = 0; c < cols; c++) dx[r * cols + c] = y[r * cols + c] * (dy[r * cols + c] - dot);
  }
  return dx;
}
