/**
 * The f64 CPU reference of cross-entropy with ignored targets: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

export interface CrossEntropyRef {
  /** Mean over counted positions (0 when none). */
  loss: number;
  count: number;
  correct: number;
  lossRows: Float64Array;
  /** Gradient of the mean loss. */
  dlogits: Float64Array;
}

/** Targets < 0 are ignored (no loss, no gradient, not counted). */
export function crossEntropyRef(logits: Vec, targets: Vec, positions: number, classes: number): CrossEntropyRef {
  const lossRows = new Float64Array(positions);
  const dlogits = new Float64Array(positions * classes);
  let count = 0;
  let correct = 0;
  let total = 0;
  for (let r = 0; r < positions; r++) {
    const t = targets[r];
    if (t < 0) continue;
    let best = 0;
    for (let j = 1; j < classes; j++) if (logits[r * classes + j] > logits[r * classes + best]) best = j;
    const m = logits[r * classes + best];
    let s = 0;
    for (let j = 0; j < classes; j++) s += Math.exp(logits[r * classes + j] - m);
    lossRows[r] = Math.log(s) - (logits[r * classes + t] - m);
    for (let j = 0; j < classes; j++)
      dlogits[r * classes + j] = Math.exp(logits[r * classes + j] - m) / s - (j === t ? 1 : 0);
    count++;
    total += lossRows[r];
    if (best === t) correct++;
  }
  const inv = 1 / Math.max(count, 1);
  for (let i = 0; i < dlogits.length; i++) dlogits[i] *= inv;
  return { loss: total * inv, count, correct, lossRows, dlogits };
}
