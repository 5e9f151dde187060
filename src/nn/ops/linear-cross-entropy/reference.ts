/**
 * The f64 CPU reference of the output head fused with cross-entropy: logits = h·Wᵀ (+ b), then
 * cross-entropy with ignored targets (the mean over counted rows), computed whole, as the unfused
 * linear and crossEntropy references would. The op's oracle (its `cpu` half) and what the kernel
 * oracle cases compare the chunked WGSL against. Written for clarity, not speed.
 */
import { crossEntropyRef } from '../cross-entropy/reference.ts';

type Vec = ArrayLike<number>;

export interface HeadShape {
  rows: number;
  width: number;
  classes: number;
}

export interface LinearCrossEntropyRef {
  loss: number;
  count: number;
  correct: number;
  dh: Float64Array;
  dw: Float64Array;
  db: Float64Array;
}

/** Targets < 0 (or ≥ classes) are ignored. `upstream` multiplies every gradient (∂/∂loss). */
export function linearCrossEntropyRef(
  h: Vec,
  w: Vec,
  bias: Vec | null,
  targets: Vec,
  s: HeadShape,
  upstream = 1,
): LinearCrossEntropyRef {
  const { rows, width, classes } = s;
  const logits = new Float64Array(rows * classes);
  for (let r = 0; r < rows; r++)
    for (let v = 0; v < classes; v++) {
      let z = bias ? bias[v] : 0;
      for (let c = 0; c < width; c++) z += h[r * width + c] * w[v * width + c];
      logits[r * classes + v] = z;
    }
  const signed = Array.from(targets, (t) => (t >= 0 && t < classes ? t : -1));
  const ce = crossEntropyRef(logits, signed, rows, classes);
  const dh = new Float64Array(rows * width);
  const dw = new Float64Array(classes * width);
  const db = new Float64Array(classes);
  for (let r = 0; r < rows; r++)
    for (let v = 0; v < classes; v++) {
      const g = ce.dlogits[r * classes + v] * upstream;
      if (g === 0) continue;
      db[v] += g;
      for (let c = 0; c < width; c++) {
        dh[r * width + c] += g * w[v * width + c];
        dw[v * width + c] += g * h[r * width + c];
      }
    }
  return { loss: ce.loss, count: ce.count, correct: ce.correct, dh, dw, db };
}
