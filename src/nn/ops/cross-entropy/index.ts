/**
 * crossEntropy: log-softmax + cross-entropy of logits [..., C] against
 * integer targets [...] (u32), mean over the counted positions, as
 * cross_entropy(logits.view(-1, C), targets.view(-1), ignore_index=-1).
 * A target of −1 (stored as 0xFFFFFFFF in the u32 tensor) is ignored: no
 * loss, no gradient, not counted. The output is the scalar loss [1].
 *
 * Forward computes the unscaled gradient (softmax − onehot) with the loss, as
 * the kernel does in one pass; backward copies it out and scales it by
 * ∂/∂loss over the count, which never left the GPU.
 */
import { crossEntropyRef } from './reference.ts';
import { planCrossEntropyParts } from './kernel.ts';
import { defineOp, shapeError, type Step } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';

/** Targets outside [0, classes), −1 included, are ignored (the kernel's rule). */
function signedTargets(t: ArrayLike<number>, classes: number): number[] {
  return Array.from(t, (v) => (v >= 0 && v < classes ? v : -1));
}

export const crossEntropyOp = defineOp<Record<string, never>>({
  name: 'crossEntropy',
  shape([logits, targets], _attrs, info) {
    if (info.dtypes[0] !== 'f32' || info.dtypes[1] !== 'u32')
      throw shapeError(info, 'crossEntropy', 'needs f32 logits and u32 targets', { logits, targets });
    if (targets.length !== logits.length - 1 || targets.some((d, i) => d !== logits[i])) {
      throw shapeError(info, 'crossEntropy', "targets must have the logits' shape without its last (class) dimension", {
        logits,
        targets,
      });
    }
    return { shape: [1] };
  },
  plan(ctx) {
    const shape = ctx.inputShapes[0];
    const classes = shape[shape.length - 1];
    const positions = sizeOf(shape) / classes;
    const dlogits = ctx.scratch(positions * classes, 'dlogits');
    const result = ctx.scratch(4, 'loss-correct-count');
    const rowStats = ctx.scratch(3 * positions, 'row-stats');
    const scratch = (words: number, label: string) => ctx.scratch(words, label);
    const { rows, total } = planCrossEntropyParts(
      ctx.gpu,
      { logits: ctx.input(0), targets: ctx.input(1), dlogits, rowStats, result },
      positions,
      classes,
      { scratch },
    );
    const out = ctx.output();
    const forward: Step[] = [
      rows,
      ...total,
      { copy: { src: { buffer: result, offset: 0, size: 4 }, dst: out, bytes: 4 } },
    ];
    const [dl, dx] = [ctx.gradOut(), ctx.gradIn(0)];
    if (!dl || !dx) return { forward, backward: [] };
    const { scale } = planCrossEntropyParts(
      ctx.gpu,
      { logits: ctx.input(0), targets: ctx.input(1), dlogits: dx, rowStats, result },
      positions,
      classes,
      { upstream: dl, scratch },
    );
    return {
      forward,
      backward: [
        {
          copy: {
            src: { buffer: dlogits, offset: 0, size: positions * classes * 4 },
            dst: dx,
            bytes: positions * classes * 4,
          },
        },
        scale,
      ],
    };
  },
  cpu: {
    forward([logits, targets], [shape]) {
      const classes = shape[shape.length - 1];
      return Float64Array.of(
        crossEntropyRef(logits, signedTargets(targets, classes), logits.length / classes, classes).loss,
      );
    },
    backward([logits, targets], [shape], _a, _y, dl) {
      const classes = shape[shape.length - 1];
      const r = crossEntropyRef(logits, signedTargets(targets, classes), logits.length / classes, classes);
      return [r.dlogits.map((g) => g * dl[0]), null];
    },
  },
});

// The functional form, for `forward` methods (nn.F).
/** Mean cross-entropy of logits […, C] against u32 targets […] (−1 ignored) → [1]. */
export const crossEntropy = (logits: Tensor, targets: Tensor): Tensor => apply(crossEntropyOp, [logits, targets], {});
