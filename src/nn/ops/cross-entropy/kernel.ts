/**
 * Log-softmax + cross-entropy over [positions × classes] with an ignore index
 * (target −1: padding), the mean taken over the counted positions, all on the
 * GPU: loss, count and correct land in a result buffer, dlogits holds the
 * gradient of the mean loss. See shaders/cross_entropy.wgsl.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../../../gpu/gpu.ts';
import { planColumnSum, type Scratch } from '../../../gpu/kernels/reduce-rows.ts';
import {
  checkBindings,
  checkDims,
  chooseReduction,
  planEntry,
  type Reduction,
  reductionShader,
} from '../../../gpu/kernels/common.ts';
import { defineKernel } from '../../../gpu/kernels/registry.ts';

defineKernel('crossEntropy', { shader: 'cross_entropy', entryPoints: ['rows', 'total', 'scale'] });
defineKernel('crossEntropySubgroups', {
  shader: 'cross_entropy+subgroups',
  entryPoints: ['rows'],
  requires: 'subgroups',
});

/** The target value that marks a position as ignored (PyTorch's ignore_index in the reference). */
export const IGNORE_TARGET = -1;

export interface CrossEntropyBuffers {
  logits: Binding;
  /** i32 per position: a class in [0, classes), or IGNORE_TARGET. */
  targets: Binding;
  /** Receives the gradient of (gradScale ×) the mean loss. */
  dlogits: Binding;
  /** Scratch, 3 floats per position. */
  rowStats: Binding;
  /** result[outIndex ..+3] = [mean loss, correct predictions, counted positions]. */
  result: Binding;
}

export interface CrossEntropyOptions {
  outIndex?: number;
  /** Multiplies the gradient; 1 by default. */
  gradScale?: number;
  /** Also multiplies the gradient by upstream[0] (∂/∂loss, when the loss is an op inside a graph). */
  upstream?: Binding;
  /** Where the sums over positions keep their partials (default: new buffers). */
  scratch?: Scratch;
  /** Forces the variant of the row and position reductions (default: the Gpu's, `gpu.subgroups`). */
  reduction?: Reduction;
}

export interface CrossEntropyPlan {
  /** Per position: loss, counted, correct, unscaled dlogits. */
  rows: Dispatch;
  /** The sums over positions (a column-sum tree) and the mean: result[outIndex ..+3]. */
  total: Dispatch[];
  /** dlogits scaled by the mean's 1/count. */
  scale: Dispatch;
}

/** The per-position rows, the totals (sums over positions, then the mean), the gradient scale: record them in order. */
export function planCrossEntropy(
  gpu: Gpu,
  b: CrossEntropyBuffers,
  positions: number,
  classes: number,
  opts: CrossEntropyOptions = {},
): Dispatch[] {
  const p = planCrossEntropyParts(gpu, b, positions, classes, opts);
  return [p.rows, ...p.total, p.scale];
}

/** planCrossEntropy's dispatches by role (an op records the first two forward and the scale backward). */
export function planCrossEntropyParts(
  gpu: Gpu,
  b: CrossEntropyBuffers,
  positions: number,
  classes: number,
  opts: CrossEntropyOptions = {},
): CrossEntropyPlan {
  checkDims('crossEntropy', { positions, classes });
  const outIndex = opts.outIndex ?? 0;
  const n = positions * classes;
  checkBindings(
    'crossEntropy',
    {
      logits: [b.logits, n],
      targets: [b.targets, positions],
      dlogits: [b.dlogits, n],
      rowStats: [b.rowStats, 3 * positions],
      result: [b.result, outIndex + 3],
    },
    { positions, classes },
  );
  const u = gpu.uniform(
    [
      ['u32', positions],
      ['u32', classes],
      ['f32', opts.gradScale ?? 1],
      ['u32', outIndex],
    ],
    'xent-dims',
  );
  const reduction = chooseReduction(gpu, opts.reduction);
  return {
    rows: planEntry(
      gpu,
      reductionShader('cross_entropy', reduction),
      'rows',
      [
        [0, u],
        [1, b.logits],
        [2, b.targets],
        [3, b.dlogits],
        [4, b.rowStats],
      ],
      linearGroups(positions, 1),
    ),
    total: [
      ...planColumnSum(
        gpu,
        b.rowStats,
        b.result,
        { rows: positions, cols: 3, dstOffset: outIndex, reduction },
        opts.scratch,
      ),
      planEntry(
        gpu,
        'cross_entropy',
        'total',
        [
          [0, u],
          [5, b.result],
        ],
        [1],
      ),
    ],
    // The shader names `upstream` behind HAS_UPSTREAM, so the layout always has it.
    scale: planEntry(
      gpu,
      'cross_entropy',
      'scale',
      [
        [0, u],
        [3, b.dlogits],
        [5, b.result],
        [6, opts.upstream ?? gpu.dummy],
      ],
      linearGroups(n, 256),
      { HAS_UPSTREAM: opts.upstream ? 1 : 0 },
    ),
  };
}

/**
 * Copies targets into an Int32Array for upload, refusing anything but an
 * integer class in [0, classes) or IGNORE_TARGET. `mask` (optional, one entry
 * per position) ignores every position where it is 0, whatever its target.
 */
export function checkTargets(
  targets: ArrayLike<number>,
  positions: number,
  classes: number,
  mask?: ArrayLike<number>,
  out: Int32Array = new Int32Array(positions),
): Int32Array {
  if (targets.length < positions) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `expected ${positions} targets, got ${targets.length}`, {
      expected: positions,
      got: targets.length,
    });
  }
  if (mask && mask.length < positions) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `expected a label mask of ${positions} entries, got ${mask.length}`,
      { expected: positions, got: mask.length },
    );
  }
  for (let i = 0; i < positions; i++) {
    const t = targets[i];
    if (!Number.isInteger(t) || t < IGNORE_TARGET || t >= classes) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `target ${i} is ${t}; targets must be integers in [0, ${classes}) or ${IGNORE_TARGET} (ignored)`,
        { index: i, target: t, classes },
      );
    }
    out[i] = mask && mask[i] === 0 ? IGNORE_TARGET : t;
  }
  return out;
}
