/**
 * Order statistics of a sample, for benchmark JSON: for each p the value at
 * sorted index ⌊p·n⌋ (the last one for p = 1), named `min` (p = 0), `max`
 * (p = 1) or `p` and the percent in two digits (0.01 → `p01`). An empty
 * sample has none.
 */
export function percentiles(xs: number[], ps: number[]): Record<string, number> {
  if (!xs.length) return {};
  const s = [...xs].sort((a, b) => a - b);
  const name = (p: number) => (p === 0 ? 'min' : p === 1 ? 'max' : `p${String(Math.round(p * 100)).padStart(2, '0')}`);
  return Object.fromEntries(ps.map((p) => [name(p), s[Math.min(s.length - 1, Math.floor(p * s.length))]]));
}
