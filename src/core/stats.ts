/**
 * The median of a list of numbers: the middle value, or the mean of the two middle values of an even
 * count; NaN for an empty list (no value is the honest answer there, and NaN spreads visibly).
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
