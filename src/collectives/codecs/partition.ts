/** How tensors are cut: into one chunk per rank, and chunks into segments. */

export interface Range {
  offset: number;
  count: number;
}

/** `count` elements in `parts` contiguous ranges; the first `count % parts` get one more. */
export function splitEven(count: number, parts: number): Range[] {
  const base = Math.floor(count / parts);
  const extra = count % parts;
  const out: Range[] = [];
  let offset = 0;
  for (let i = 0; i < parts; i++) {
    const c = base + (i < extra ? 1 : 0);
    out.push({ offset, count: c });
    offset += c;
  }
  return out;
}

/** Consecutive ranges from per-part counts (uneven allgather, alltoall splits). */
export function fromCounts(counts: number[]): Range[] {
  let offset = 0;
  return counts.map((count) => {
    const r = { offset, count };
    offset += count;
    return r;
  });
}

/** Cuts `r` into segments of at most `maxCount` elements (none for an empty range). */
export function segmentsOf(r: Range, maxCount: number): Range[] {
  const out: Range[] = [];
  for (let o = 0; o < r.count; o += maxCount)
    out.push({ offset: r.offset + o, count: Math.min(maxCount, r.count - o) });
  return out;
}
