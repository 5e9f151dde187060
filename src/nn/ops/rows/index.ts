/**
 * rows: the first n rows of a [P, …] tensor, [n, …]. GPT-2 keeps P = 1,024
 * learned positions and may train on windows of n < P tokens: its forward
 * reads the first n rows of the position table (PyTorch: `wpe.weight[:n]`).
 *
 * Two copies, no kernel. Backward copies ∂out into the first n rows of ∂x and
 * zeros into the rest: the rows past n are never read, so their gradient is
 * zero, as PyTorch's is (the op overwrites its whole gradIn, as the op
 * contract says, so a part the planner sums into a shared gradient is right too).
 */
import type { Step } from '../../op.ts';
import { defineOp, requireF32, shapeError } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';

export interface RowsAttrs extends Record<string, unknown> {
  /** How many leading rows to keep (1 to the input's first dimension). */
  rows: number;
}

export const rowsOp = defineOp<RowsAttrs>({
  name: 'rows',
  shape([x], { rows }, info) {
    requireF32(info, 'rows', [x]);
    if (x.length < 1 || !Number.isInteger(rows) || rows < 1 || rows > x[0]) {
      throw shapeError(info, 'rows', `cannot take the first ${rows} rows: give 1 to ${x[0] ?? 0}`, { x });
    }
    return { shape: [rows, ...x.slice(1)] };
  },
  plan(ctx) {
    const bytes = sizeOf(ctx.outputShape) * 4;
    const forward: Step[] = [{ copy: { src: ctx.input(0), dst: ctx.output(), bytes } }];
    const dz = ctx.gradOut();
    const dx = ctx.gradIn(0);
    const backward: Step[] = [];
    if (dz && dx) {
      backward.push({ copy: { src: dz, dst: dx, bytes } });
      const rest = sizeOf(ctx.inputShapes[0]) * 4 - bytes;
      if (rest > 0) {
        // A fresh buffer is zeroed and nothing else writes it: the zero gradient of the unread rows.
        const zeros = ctx.scratch(rest / 4, 'zeros');
        backward.push({ copy: { src: { buffer: zeros, offset: 0, size: rest }, dst: { buffer: dx.buffer, offset: (dx.offset ?? 0) + bytes, size: rest }, bytes: rest } });
      }
    }
    return { forward, backward };
  },
  cpu: {
    forward: ([x], [shape], { rows }) => x.slice(0, (x.length / shape[0]) * rows),
    backward: ([x], _s, _a, _z, dz) => {
      const dx = new Float64Array(x.length);
      dx.set(dz);
      return [dx];
    },
  },
});

// The functional form, for `forward` methods (nn.F).
export const rows = (x: Tensor, n: number): Tensor => apply(rowsOp, [x], { rows: n });
