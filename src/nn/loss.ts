/**
 * Losses: the head a model's output ends in. A loss turns the output
 * [rows, classes] and the targets into the batch's mean loss and a count of
 * correct rows (both in a small results buffer, so one read serves
 * training and evaluation), and writes ∂(mean loss)/∂output, which seeds the
 * backward pass. It is planned once per batch shape like the ops.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { BufferRange, Gpu } from '../gpu/gpu.ts';
import { planSumTree } from '../gpu/kernels/reduce-rows.ts';
import { checkTargets, planCrossEntropy } from './ops/cross-entropy/kernel.ts';
import { crossEntropyRef } from './ops/cross-entropy/reference.ts';
import { planSoftmaxXent } from '../gpu/kernels/softmax-xent.ts';
import type { Step } from './op.ts';

/** Where the head's numbers go: results[0] = mean loss, results[1] = correct rows, results[2] = counted rows (losses with `counts`). */
export const RESULT_LOSS = 0;
export const RESULT_CORRECT = 1;
export const RESULT_COUNT = 2;

export interface LossIO {
  output: BufferRange;
  /** ∂(mean loss)/∂output, written by the head. */
  dOutput: BufferRange;
  /** One target per row, as `encodeTargets` made them. */
  targets: GPUBuffer;
  /** results[RESULT_LOSS], results[RESULT_CORRECT]. */
  results: GPUBuffer;
  rows: number;
  classes: number;
  scratch(words: number, label: string): GPUBuffer;
}

export interface Loss {
  readonly name: string;
  /** Whether some rows may not count (ignored targets): then results[RESULT_COUNT] holds how many did. */
  readonly counts?: boolean;
  /** Checks the targets and packs them as the kernel reads them; throws InvalidArgument naming a bad one. */
  encodeTargets(targets: ArrayLike<number>, rows: number, classes: number, out: Int32Array): Int32Array;
  plan(gpu: Gpu, io: LossIO): Step[];
  /** f64 reference: mean loss and ∂/∂output, for the model-level gradient check. */
  cpu(
    output: Float64Array,
    targets: ArrayLike<number>,
    rows: number,
    classes: number,
  ): { loss: number; dOutput: Float64Array };
}

/** Softmax cross-entropy with one class index per row (nn.CrossEntropyLoss, mean reduction). */
export const crossEntropy: Loss = {
  name: 'cross-entropy',
  encodeTargets(targets, rows, classes, out) {
    if (targets.length !== rows) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `expected ${rows} labels (one per output row), got ${targets.length}`,
        { expected: rows, got: targets.length },
      );
    }
    for (let i = 0; i < rows; i++) {
      const y = targets[i];
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
  },
  plan(gpu, io) {
    const lossRows = io.scratch(io.rows, 'loss-rows');
    const correct = io.scratch(io.rows, 'correct');
    return [
      planSoftmaxXent(
        gpu,
        { logits: io.output, labels: io.targets, dLogits: io.dOutput, lossRows, correct },
        io.rows,
        io.classes,
      ),
      ...planSumTree(gpu, lossRows, io.results, io.rows, { outIndex: RESULT_LOSS, scale: 1 / io.rows }, io.scratch),
      ...planSumTree(gpu, correct, io.results, io.rows, { outIndex: RESULT_CORRECT }, io.scratch),
    ];
  },
  cpu(z, targets, rows, classes) {
    const d = new Float64Array(z.length);
    let loss = 0;
    for (let r = 0; r < rows; r++) {
      const row = z.subarray(r * classes, (r + 1) * classes);
      const max = Math.max(...row);
      const sum = row.reduce((a, v) => a + Math.exp(v - max), 0);
      loss += Math.log(sum) - (row[targets[r]] - max);
      for (let j = 0; j < classes; j++)
        d[r * classes + j] = (Math.exp(row[j] - max) / sum - (j === targets[r] ? 1 : 0)) / rows;
    }
    return { loss: loss / rows, dOutput: d };
  },
};

/**
 * Cross-entropy over positions with an ignore index: a target of -1 (padding)
 * adds no loss and no gradient and is not counted; the mean is over counted
 * positions, as F.cross_entropy(..., ignore_index=-1). Kernel:
 * src/nn/ops/cross-entropy/kernel.ts.
 */
export const crossEntropyIgnore: Loss = {
  name: 'cross-entropy-ignore',
  counts: true,
  encodeTargets(targets, rows, classes, out) {
    if (targets.length !== rows) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `expected ${rows} targets (one per output position), got ${targets.length}`,
        { expected: rows, got: targets.length },
      );
    }
    return checkTargets(targets, rows, classes, undefined, out);
  },
  plan(gpu, io) {
    const rowStats = io.scratch(3 * io.rows, 'row-stats');
    return planCrossEntropy(
      gpu,
      { logits: io.output, targets: io.targets, dlogits: io.dOutput, rowStats, result: io.results },
      io.rows,
      io.classes,
      { outIndex: RESULT_LOSS, scratch: io.scratch },
    );
  },
  cpu(z, targets, rows, classes) {
    const r = crossEntropyRef(z, Array.from(targets), rows, classes);
    return { loss: r.loss, dOutput: Float64Array.from(r.dlogits) };
  },
};
