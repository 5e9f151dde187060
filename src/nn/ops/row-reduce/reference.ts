/** The f64 references of mean and max over the last dimension: the ops' oracles. */

type Vec = ArrayLike<number>;

/** The first column holding the row's maximum (what the kernel's backward routes the gradient to). */
function argmax(x: Vec, base: number, cols: number): number {
  let best = 0;
  for (let c = 1; c < cols; c++) if (x[base + c] > x[base + best]) best = c;
  return best;
}

export function meanRowsRef(x: Vec, rows: number, cols: number): Float64Array {
  return Float64Array.from({ length: rows }, (_, r) => {
    let s = 0;
    for (let c = 0; c < cols; c++) s += x[r * cols + c];
    return s / cols;
  });
}

export function meanRowsBackwardRef(dy: Vec, rows: number, cols: number): Float64Array {
  return Float64Array.from({ length: rows * cols }, (_, i) => dy[Math.floor(i / cols)] / cols);
}

export function maxRowsRef(x: Vec, rows: number, cols: number): Float64Array {
  return Float64Array.from({ length: rows }, (_, r) => x[r * cols + argmax(x, r * cols, cols)]);
}

export function maxRowsBackwardRef(x: Vec, dy: Vec, rows: number, cols: number): Float64Array {
  const dx = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) dx[r * cols + argmax(x, r * cols, cols)] = dy[r];
  return dx;
}
