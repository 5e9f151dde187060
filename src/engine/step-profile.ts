/**
 * Where a training step's time goes, on one model and optimizer as training
 * builds them: the wall time per step (losses read every few steps, as
 * trainLocal does), the CPU time to encode and submit one step with the GPU
 * idle, and each kernel's GPU time in one step (src/gpu/profile.ts over a
 * `Gpu.capture()` of the step), grouped by kernel label.
 *
 * Runtime-agnostic: the caller loads the data and prints the result.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { DispatchCapture, Gpu } from '../gpu/gpu.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { groupByLabel, type KernelRow, type KernelTimingMethod, timeDispatches } from '../gpu/profile.ts';
import type { Model } from './model.ts';
import type { Optimizer } from './optimizer.ts';
import { trainStepDeferred } from './train-step.ts';
import { median } from '../core/stats.ts';

export interface ProfileBatch {
  x: Float32Array;
  labels: ArrayLike<number>;
}

export interface StepProfileOptions {
  model: Model;
  optimizer: Optimizer;
  /** Batches to step through, used in turn (cycled when there are fewer than the steps). */
  batches: readonly ProfileBatch[];
  /** Timed steps, for the wall time and again for the encode time (default 20). */
  steps?: number;
  /** Runs of each dispatch per kernel measurement (default 10). */
  rounds?: number;
  /** Untimed steps first: pipelines compile, plans are made (default 2). */
  warmup?: number;
  /** Losses read every this many steps in the wall-time run (default 10, as trainLocal). */
  readEvery?: number;
  method?: KernelTimingMethod | 'auto';
  /** The learning rate of step s, as the training schedule gives it (passed to every step, as trainLocal does). */
  lrAt?: (step: number) => number;
}

export interface StepProfile {
  steps: number;
  rounds: number;
  /** Wall milliseconds per step. */
  stepMs: number;
  /** CPU milliseconds from a step's start until its submit returns, GPU idle before it: the median over `steps`. */
  encodeCpuMs: number;
  /** The fastest of those. */
  encodeCpuMinMs: number;
  /** Of encodeCpuMs, the last submit alone (median): where a runtime that executes on submit (a CPU adapter) shows it. */
  submitCpuMs: number;
  /** GPU milliseconds of one step's kernels, added up. */
  kernelsMs: number;
  dispatchesPerStep: number;
  method: KernelTimingMethod;
  kernels: KernelRow[];
  /** The losses of the warm-up and wall-time steps (a diverged run is no profile). */
  losses: number[];
}

/** The options' counts with their defaults, each checked. */
function profileCounts(o: StepProfileOptions): { steps: number; warmup: number; readEvery: number; rounds: number } {
  const counts = { steps: o.steps ?? 20, warmup: o.warmup ?? 2, readEvery: o.readEvery ?? 10, rounds: o.rounds ?? 10 };
  for (const [name, v, min] of [
    ['steps', counts.steps, 1],
    ['warmup', counts.warmup, 0],
    ['readEvery', counts.readEvery, 1],
  ] as const) {
    if (!Number.isInteger(v) || v < min)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `profile: ${name} must be a whole number ≥ ${min}, got ${v}`,
        { [name]: v },
      );
  }
  if (o.batches.length === 0)
    throw new RingtrainError(ErrorCode.InvalidArgument, 'profile: no batches to step through');
  return counts;
}

/**
 * Encode + submit, each step alone on an idle GPU, so no GPU work competes for the CPU;
 * the last one's dispatches are captured (a capture only keeps references).
 */
async function timeEncodeAndSubmit(
  gpu: Gpu,
  steps: number,
  oneStep: () => void,
): Promise<{ encode: number[]; submit: number[]; capture: DispatchCapture }> {
  const encode: number[] = [];
  const submit: number[] = [];
  let capture: DispatchCapture | undefined;
  for (let i = 0; i < steps; i++) {
    await gpu.sync();
    if (i === steps - 1) capture = gpu.capture();
    const t = performance.now();
    oneStep();
    const beforeSubmit = performance.now();
    gpu.flush();
    const end = performance.now();
    encode.push(end - t);
    submit.push(end - beforeSubmit);
    capture?.stop();
  }
  return { encode, submit, capture: capture! };
}

export async function profileSteps(o: StepProfileOptions): Promise<StepProfile> {
  const { model, optimizer } = o;
  const gpu = model.gpu;
  const { steps, warmup, readEvery, rounds } = profileCounts(o);
  const sink = new DeferredScalars(gpu, readEvery);
  let step = 0;
  const oneStep = () => {
    const b = o.batches[step % o.batches.length];
    trainStepDeferred(model, optimizer, b.x, b.labels, sink, o.lrAt?.(step));
    step++;
  };
  try {
    const losses: number[] = [];
    for (let i = 0; i < warmup; i++) oneStep();
    losses.push(...(await sink.collect()));

    // (a) Wall time: steps recorded back to back, losses read every readEvery steps.
    const t0 = performance.now();
    for (let i = 0; i < steps; i++) {
      oneStep();
      if ((i + 1) % readEvery === 0) losses.push(...(await sink.collect()));
    }
    losses.push(...(await sink.collect()));
    const stepMs = (performance.now() - t0) / steps;

    // (b) Encode + submit alone, the last step's dispatches captured for (c).
    const { encode, submit, capture } = await timeEncodeAndSubmit(gpu, steps, oneStep);
    await sink.collect();

    // (c) Each of one step's dispatches, timed alone.
    const timed = await timeDispatches(gpu, capture.dispatches, { rounds, method: o.method });
    const kernels = groupByLabel(capture.dispatches, timed.ms);
    return {
      steps,
      rounds,
      stepMs,
      encodeCpuMs: median(encode),
      encodeCpuMinMs: Math.min(...encode),
      submitCpuMs: median(submit),
      kernelsMs: timed.ms.reduce((a, b) => a + b, 0),
      dispatchesPerStep: capture.dispatches.length,
      method: timed.method,
      kernels,
      losses,
    };
  } finally {
    sink.destroy();
  }
}
