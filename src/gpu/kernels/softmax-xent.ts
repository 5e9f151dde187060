/**
 * Softmax cross-entropy forward and backward in one kernel: per-row loss,
 * per-row correctness, and dLogits for the MEAN loss over the batch.
 * Labels are u32 and must be < classes (check them on the CPU: `checkLabels`).
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('softmaxXent', { shader: 'softmax_xent', entryPoints: ['main'] });

export interface SoftmaxXentBuffers {
  logits: Binding;
  labels: Binding;
  dLogits: Binding;
  lossRows: Binding;
  correct: Binding;
}

export function planSoftmaxXent(gpu: Gpu, b: SoftmaxXentBuffers, batch: number, classes: number): Dispatch {
  checkDims('softmaxCrossEntropy', { batch, classes });
  const dims = gpu.uniform(
    [
      ['u32', batch],
      ['u32', classes],
      ['f32', 1 / batch],
      ['u32', 0],
    ],
    'xent-dims',
  );
  return gpu.plan(
    'softmax_xent',
    [dims, b.logits, b.labels, b.dLogits, b.lossRows, b.correct],
    linearGroups(batch, 64),
  );
}

/** Copies labels to u32, throwing InvalidArgument on any label that is not an integer in [0, classes). */
export function checkLabels(
  labels: ArrayLike<number>,
  count: number,
  classes: number,
  out: Uint32Array = new Uint32Array(count),
): Uint32Array {
  if (labels.length < count) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `expected ${count} labels, got ${labels.length}`, {
      expected: count,
      got: labels.length,
    });
  }
  for (let i = 0; i < count; i++) {
    const y = labels[i];
    if (!Number.isInteger(y) || y < 0 || y >= classes) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `label ${i} is ${y}; labels must be integers in [0, ${classes})`,
        { index: i, label: y, classes },
      );
    }
    out[i] = y;
  }
  return out;
}
