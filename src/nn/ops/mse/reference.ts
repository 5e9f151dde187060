/**
 * The f64 CPU reference of mean squared error: the op's oracle (its `cpu` half) and what
 * the kernel oracle cases compare the WGSL against. Written for clarity, not speed.
 */
type Vec = ArrayLike<number>;

export function mseRef(pred: Vec, target: Vec): { loss: number; dpred: Float64Array } {
  const n = pred.length;
  let s = 0;
  for (let i = 0; i < n; i++) s += (pred[i] - target[i]) ** 2;
  return { loss: s / n, dpred: Float64Array.from(pred, (p, i) => (2 * (p - target[i])) / n) };
}
