/**
 * Single-peer training steps. `trainStep` waits for the loss (one GPU→CPU
 * wait per step); `trainStepDeferred` never waits: the loss goes into a
 * DeferredScalars that the caller collects every few steps, as single-peer
 * training does (training-loop.ts, at one rank).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { DeferredScalars } from '../gpu/readback.ts';
import type { Model } from './model.ts';
import type { Optimizer } from './optimizer.ts';

export async function trainStep(
  model: Model,
  optimizer: Optimizer,
  x: Float32Array,
  labels: ArrayLike<number>,
  lr?: number,
): Promise<number> {
  const loss = await model.forwardBackward(x, labels);
  // f16-mixed: a step whose gradients overflowed is not applied (loss-scale.ts).
  if (!model.lossScaler || (await model.lossScaler.endStep())) optimizer.step(lr);
  return loss;
}

/** Records forward, backward and the update, and the batch's mean loss into `sink`; never waits for the GPU. */
export function trainStepDeferred(
  model: Model,
  optimizer: Optimizer,
  x: Float32Array,
  labels: ArrayLike<number>,
  sink: DeferredScalars,
  lr?: number,
): void {
  if (model.lossScaler)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'trainStepDeferred: a model in f16-mixed precision must read its overflow flag before each update (an overflowed step is skipped); use trainStep',
    );
  model.forwardBackwardDeferred(x, labels, undefined, sink);
  optimizer.step(lr);
}

/**
 * The shared half of `Model.forwardBackwardDeferred`: once a model has
 * recorded its step and its mean loss sits in a GPU buffer, this records the
 * loss's copy into `sink`, after everything recorded so far.
 */
export function recordDeferredLoss(
  gpu: Gpu,
  sink: DeferredScalars,
  lossBuffer: GPUBuffer,
  lossOffsetBytes: number,
): void {
  if (sink.gpu !== gpu) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'forwardBackwardDeferred: the DeferredScalars belongs to another Gpu; make it with new DeferredScalars(model.gpu)',
    );
  }
  sink.record(gpu.commandEncoder(), lossBuffer, lossOffsetBytes);
}
