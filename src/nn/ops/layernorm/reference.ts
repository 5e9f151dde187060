/**
 * The f64 CPU reference of layer norm over the last dimension: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

export function layerNormRef(
  x: Vec,
  w: Vec,
  b: Vec,
  rows: number,
  cols: number,
  eps = 1e-5,
): { y: Float64Array; mean: Float64Array; rstd: Float64Array } {
  const y = new Float64Array(rows * cols);
  const mean = new Float64Array(rows);
  const rstd = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += x[r * cols + c];
    const m = s / cols;
    let v = 0;
    for (let c = 0; c < cols; c++) v += (x[r * cols + c] - m) ** 2;
    const rs = 1 / Math.sqrt(v / cols + eps);
    for (let c = 0; c < cols; c++) y[r * cols + c] = (x[r * cols + c] - m) * rs * w[c] + b[c];
    mean[r] = m;
    rstd[r] = rs;
  }
  return { y, mean, rstd };
}

export function layerNormBackwardRef(
  x: Vec,
  w: Vec,
  dy: Vec,
  rows: number,
  cols: number,
  eps = 1e-5,
): { dx: Float64Array; dw: Float64Array; db: Float64Array } {
  const { mean, rstd } = layerNormRef(x, w, new Float64Array(cols), rows, cols, eps);
  const dx = new Float64Array(rows * cols);
  const dw = new Float64Array(cols);
  const db = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const xhat = (c: number) => (x[r * cols + c] - mean[r]) * rstd[r];
    let sg = 0;
    let sgx = 0;
    for (let c = 0; c < cols; c++) {
      const g = dy[r * cols + c] * w[c];
      sg += g;
      sgx += g * xhat(c);
      dw[c] += dy[r * cols + c] * xhat(c);
      db[c] += dy[r * cols + c];
    }
    for (let c = 0; c < cols; c++)
      dx[r * cols + c] = rstd[r] * (dy[r * cols + c] * w[c] - sg / cols - (xhat(c) * sgx) / cols);
  }
  return { dx, dw, db };
}
