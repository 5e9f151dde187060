/**
 * For kernels that write several gradients in one dispatch: where an input
 * needs no gradient (gradIn(i) is null) the kernel still needs somewhere to
 * write, so it gets a scratch buffer of its own, made once at plan time.
 */
import type { BufferRange } from '../../gpu/gpu.ts';
import type { PlanContext } from '../op.ts';

export function gradOrScratch(ctx: PlanContext, i: number, words: number, label: string): BufferRange {
  return ctx.gradIn(i) ?? { buffer: ctx.scratch(words, `${label} (unused gradient)`), offset: 0, size: words * 4 };
}

/** The size of the last dimension and the number of rows before it. */
export function rowsOf(shape: readonly number[]): { rows: number; cols: number } {
  const cols = shape[shape.length - 1];
  return { rows: shape.reduce((a, b) => a * b, 1) / cols, cols };
}
