/**
 * linearCrossEntropy: the output head fused with its loss, cross_entropy(h·Wᵀ + b, targets,
 * ignore_index=-1) with the mean over the counted rows, for h [..., C], W [V, C] (a Linear's
 * [out, in]), u32 targets [...] (−1 ignored) and an optional bias [V]. The output is the loss [1].
 *
 * The same function as linear followed by crossEntropy, but the logits [rows × V] and their gradient
 * are never whole: rows go in chunks whose logits fit one chunk buffer (kernel.ts), and backward
 * computes each chunk's logits again instead of keeping them. At GPT-2's shape (8,192 rows, 50,257
 * classes) that is 128 MiB of chunk instead of 1.65 GB of logits and 1.65 GB of their gradient, for
 * one more h·Wᵀ per step. `attrs.chunkRows` caps the rows per chunk (a smaller chunk, for tests of
 * many chunks at small shapes).
 */
import { chunkRows, planHeadBackward, planHeadForward } from './kernel.ts';
import { type HeadShape, linearCrossEntropyRef } from './reference.ts';
import { defineOp, shapeError } from '../../op.ts';
import { apply, type Parameter, type Shape, type Tensor } from '../../tensor.ts';

export interface LinearCrossEntropyAttrs extends Record<string, unknown> {
  chunkRows?: number;
}

function dims(shapes: readonly Shape[]): HeadShape {
  const h = shapes[0];
  const width = h[h.length - 1];
  return { rows: h.reduce((a, b) => a * b, 1) / width, width, classes: shapes[1][0] };
}

/** Targets outside [0, classes) are ignored (the kernel's rule). */
function signedTargets(t: ArrayLike<number>, classes: number): number[] {
  return Array.from(t, (v) => (v >= 0 && v < classes ? v : -1));
}

export const linearCrossEntropyOp = defineOp<LinearCrossEntropyAttrs>({
  name: 'linearCrossEntropy',
  // Backward computes the logits again from h, W and b; the loss itself is not read.
  backwardReads: () => ({ inputs: [0, 1, 2, 3], output: false }),
  shape([h, w, targets, b], attrs, info) {
    const [hd, wd, td, bd] = info.dtypes;
    const shapes = { h, weight: w, targets, ...(b ? { bias: b } : {}) };
    if (hd !== 'f32' || wd !== 'f32' || td !== 'u32' || (b && bd !== 'f32'))
      throw shapeError(info, 'linearCrossEntropy', 'needs f32 h, weight and bias and u32 targets', shapes);
    if (h.length < 1 || w.length !== 2 || h[h.length - 1] !== w[1])
      throw shapeError(
        info,
        'linearCrossEntropy',
        "needs h [..., in] and weight [classes, in] with h's last dimension equal to in",
        shapes,
      );
    if (targets.length !== h.length - 1 || targets.some((d, i) => d !== h[i]))
      throw shapeError(info, 'linearCrossEntropy', "targets must have h's shape without its last dimension", shapes);
    if (b && (b.length !== 1 || b[0] !== w[0]))
      throw shapeError(info, 'linearCrossEntropy', `bias must be [${w[0]}]`, shapes);
    const most = attrs.chunkRows;
    if (most !== undefined && !(Number.isInteger(most) && most >= 1))
      throw shapeError(info, 'linearCrossEntropy', `chunkRows must be a positive integer, got ${most}`, shapes);
    return { shape: [1] };
  },
  plan(ctx, attrs) {
    const s = dims(ctx.inputShapes);
    const hasBias = ctx.inputShapes.length === 4;
    const per = chunkRows(ctx.gpu, s, attrs.chunkRows);
    // norm and result: written by forward, read by backward.
    const b = {
      h: ctx.input(0),
      w: ctx.input(1),
      targets: ctx.input(2),
      bias: hasBias ? ctx.input(3) : null,
      norm: ctx.scratch(2 * s.rows, 'row-max-sum'),
      result: ctx.scratch(4, 'loss-correct-count'),
    };
    const forward = planHeadForward(ctx.gpu, b, s, per, ctx.output(), (w, l) => ctx.scratch(w, l, 'forward'));
    const upstream = ctx.gradOut();
    if (!upstream) return { forward, backward: [] };
    const grads = { upstream, dh: ctx.gradIn(0), dw: ctx.gradIn(1), db: hasBias ? ctx.gradIn(3) : null };
    const backward = planHeadBackward(ctx.gpu, b, grads, s, per, (w, l) => ctx.scratch(w, l, 'backward'));
    return { forward, backward };
  },
  cpu: {
    forward([h, w, targets, b], shapes) {
      const s = dims(shapes);
      return Float64Array.of(linearCrossEntropyRef(h, w, b ?? null, signedTargets(targets, s.classes), s).loss);
    },
    backward([h, w, targets, b], shapes, _a, _y, dOut) {
      const s = dims(shapes);
      const r = linearCrossEntropyRef(h, w, b ?? null, signedTargets(targets, s.classes), s, dOut[0]);
      return b ? [r.dh, r.dw, null, r.db] : [r.dh, r.dw, null];
    },
  },
});

type T = Tensor | Parameter;

// The functional form, for `forward` methods (nn.F).
/** Mean cross-entropy of h·Wᵀ (+ b) against u32 targets (−1 ignored), the logits never whole → [1]. */
export const linearCrossEntropy = (
  h: Tensor,
  weight: T,
  targets: Tensor,
  bias?: T,
  attrs: LinearCrossEntropyAttrs = {},
): Tensor => apply(linearCrossEntropyOp, bias ? [h, weight, targets, bias] : [h, weight, targets], attrs);
