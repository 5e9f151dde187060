/**
 * Training on one peer: epochs of seeded mini-batches through the engine's
 * model and optimizer, test accuracy after each epoch, checkpoints, and
 * RingEvents for whoever watches (the CLI's progress bar, the page).
 *
 * Runtime-agnostic (no files, no process): the caller loads the data, writes
 * checkpoints where it likes, and renders the events.
 *
 * It is the ring's training loop (training-loop.ts) at one rank, with one
 * peer's part: the optimizer applies the gradients where they lie, on the
 * GPU, and each step's loss is recorded into a DeferredScalars and read every
 * `readEvery` steps (default 10) and before each evaluation, so the loop
 * never waits for the GPU per step and a runtime with a slow GPU→CPU round
 * trip (Deno: ~11 ms) pays it once per K steps. The per-step events go out
 * when their losses arrive.
 *
 * Steps are counted from the start of training, across resumes: a checkpoint
 * at step s resumes at epoch ⌊s / stepsPerEpoch⌋, batch s mod stepsPerEpoch of
 * the same seeded order, so a run stopped and resumed takes the same steps as
 * one that never stopped.
 */
import { useMixedPrecision } from './mixed-precision.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { EventBus } from '../../core/events.ts';
import { detectRuntime } from '../../core/runtime.ts';
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import { batchCount } from '../../data/batches.ts';
import { type Dataset, datasetMetadata } from '../../data/dataset.ts';
import { createModel, createOptimizer, type Model, type Optimizer, useMicroBatch } from '../../engine/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { DeferredScalars } from '../../gpu/readback.ts';
import type { LocalTrainConfig } from './config-types.ts';
import { checkDataFits, modelSpecFor } from './model-fit.ts';
import {
  TrainingLoop,
  type LoopArgs,
  type LoopConfig,
  type LoopHandle,
  type Peers,
  type RunRecord,
  type StepScaling,
  type StepUpdate,
} from './training-loop.ts';
import type { TrainingState } from './training-state.ts';

// The model a config builds: what a caller rebuilds to load a run's checkpoints (the page does).
export { modelSpecFor } from './model-fit.ts';
export type { LocalTrainConfig } from './config-types.ts';

export const DEFAULT_READ_EVERY = 10;

export interface LocalTrainResult {
  steps: number;
  /** Epochs completed. */
  epochs: number;
  /** Steps taken in this run (excluding those before a resume). */
  stepsThisRun: number;
  /** True when `signal` stopped the run before its last step. */
  interrupted: boolean;
  testAccuracy: number;
  testLoss: number;
  /** Mean training loss over the last epoch's (or run's) steps. */
  trainLoss: number;
  /** Training samples per second, evaluation excluded. */
  samplesPerS: number;
  /** Counted targets (labels other than -1) per second: characters for the words workload, samples for a classifier. */
  tokensPerS: number;
  trainSeconds: number;
  /** The model's parameters (a tied weight counted once). */
  params: number;
  runtime: string;
  adapter: string;
  /** GPU→CPU waits during the run (Gpu.waits), evaluations and checkpoints included. */
  gpuWaits: number;
  /** --precision f16-mixed: steps whose update was skipped for an overflow, and the loss scale at the end (absent in f32). */
  mixedPrecision?: { skippedSteps: number; lossScale: number };
  /** Set when the last evaluation failed (testAccuracy and testLoss are NaN then; the run and its checkpoints stand). */
  evaluationFailure?: RingtrainError;
}

export interface LocalTrainArgs {
  gpu: Gpu;
  train: Dataset;
  test: Dataset;
  config: LocalTrainConfig;
  bus?: EventBus;
  resume?: TrainingCheckpoint;
  resumeName?: string;
  /** Called with a checkpoint after each epoch and at the end (an interrupted run included). */
  onCheckpoint?: (c: TrainingCheckpoint) => void | Promise<void>;
  /** Aborting stops training after the current step; the run still evaluates and checkpoints, and reports `interrupted`. */
  signal?: AbortSignal;
  /** The first weights (`--init-from`): the model's flat parameters, in place of its random init; throws when they do not fit it. */
  initialParams?: (model: Model) => Float32Array;
}

export async function trainLocal(args: LocalTrainArgs): Promise<LocalTrainResult> {
  const { gpu, train, config } = args;
  const stepsPerEpoch = batchCount(train.count, config.batch);
  if (stepsPerEpoch === 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--batch ${config.batch} is larger than the ${train.count} training examples; use a smaller batch.`,
    );
  }
  const readEvery = config.readEvery ?? DEFAULT_READ_EVERY;
  if (!Number.isInteger(readEvery) || readEvery < 1) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `readEvery must be a positive whole number of steps, got ${readEvery}`,
      { readEvery },
    );
  }
  const waitsBefore = gpu.waits;
  const model = createModel(gpu, modelSpecFor(config, train));
  try {
    checkDataFits(model, train);
    useMicroBatch(model, config.microBatch, config.batch);
    if (config.precision === 'f16-mixed') useMixedPrecision(model);
    if (args.initialParams) model.writeParams(args.initialParams(model));
  } catch (err) {
    model.destroy();
    throw err;
  }
  const optimizer = createOptimizer(model, {
    kind: config.optimizer,
    lr: config.lr,
    momentum: config.momentum,
    weightDecay: config.weightDecay,
  });
  const losses = new DeferredScalars(gpu, readEvery);
  try {
    const peers = new OnePeer(model, optimizer, args.test, readEvery);
    const record = onePeerRecord(config, model, stepsPerEpoch, datasetMetadata(train));
    const loop = new TrainingLoop(loopArgs(args), { peers, record, model, optimizer, losses, bus: args.bus });
    await loop.run();
    return {
      ...onePeerResult(loop.state, config, stepsPerEpoch, gpu),
      params: model.paramCount,
      gpuWaits: gpu.waits - waitsBefore,
      evaluationFailure: loop.evaluationFailure,
      ...(model.lossScaler
        ? { mixedPrecision: { skippedSteps: model.lossScaler.skipped, lossScale: model.lossScaler.scale } }
        : {}),
    };
  } finally {
    losses.destroy();
    optimizer.destroy();
    model.destroy();
  }
}

/** The loop's settings and hooks for one peer: its warm-up ramps from zero (the transformer recipe) and never scales by a ring's size. */
function loopArgs(args: LocalTrainArgs): LoopArgs {
  const { model, optimizer, epochs, steps, batch, lr, seed, sampling, lrSchedule, warmupSteps } = args.config;
  const config: LoopConfig = {
    model,
    optimizer,
    epochs,
    steps,
    batch,
    lr,
    seed,
    sampling,
    lrSchedule,
    warmupSteps,
    warmupFrom: 'zero',
    scaleLr: false,
  };
  const { signal } = args;
  return {
    config,
    train: args.train,
    test: args.test,
    resume: args.resume,
    resumeName: args.resumeName,
    onCheckpoint: args.onCheckpoint,
    shouldStop: () => signal?.aborted === true,
  };
}

/**
 * One peer alone, the ring of one: its gradients never leave the GPU, where the optimizer
 * applies them, and the steps' losses wait there, read every `readEvery` steps, so the loop
 * never waits for the GPU per step.
 */
class OnePeer implements Peers {
  readonly rank = 0;
  readonly size = 1;
  readonly name = '';
  readonly bytesSent = 0;
  shares: readonly number[] = [];

  constructor(
    private readonly model: Model,
    private readonly optimizer: Optimizer,
    private readonly test: Dataset,
    readonly readEvery: number,
  ) {}

  async start(loop: LoopHandle): Promise<void> {
    this.shares = [loop.fit()];
  }

  async guarded(work: () => Promise<void>): Promise<boolean> {
    await work();
    return true;
  }

  async membershipChanged(): Promise<void> {}

  async apply(s: StepUpdate): Promise<{ bytesSent: number; scaling?: StepScaling }> {
    const scaler = this.model.lossScaler;
    if (!scaler) {
      this.optimizer.step(s.lr);
      return { bytesSent: 0 };
    }
    // f16-mixed: a step whose gradients overflowed is not applied (loss-scale.ts).
    const lossScale = scaler.scale;
    const applied = await scaler.endStep();
    if (applied) this.optimizer.step(s.lr);
    return { bytesSent: 0, scaling: { lossScale, skipped: !applied } };
  }

  async afterStep(): Promise<void> {}

  evaluate(): Promise<{ accuracy: number; loss: number }> {
    return this.model.evaluate(this.test.inputs, this.test.labels);
  }
}

/**
 * What one peer's checkpoints record: the step, whose epoch and batch follow from it, and the
 * learning-rate schedule. A resume reads the position from the step alone, whatever file it is.
 */
function onePeerRecord(
  config: LocalTrainConfig,
  model: Model,
  stepsPerEpoch: number,
  trainedOn: Record<string, string>,
): RunRecord {
  return {
    // A run with nothing left to train has nothing new to save: the file it resumed holds that state.
    handsOutUntrained: false,
    resume: (state, c) => state.resumeAtStep(c.step, stepsPerEpoch, config.batch),
    describe: (state) => ({
      epoch: Math.floor(state.step / stepsPerEpoch),
      extra: {
        seed: String(config.seed),
        batch: String(config.batch),
        lr: String(config.lr),
        lr_schedule: config.lrSchedule ?? 'constant',
        model_spec: JSON.stringify(model.spec),
        ...trainedOn,
      },
    }),
  };
}

/** The run's result: one peer's epochs follow from its step, and its train loss is the last epoch's (or run's) mean. */
function onePeerResult(
  state: TrainingState,
  config: LocalTrainConfig,
  stepsPerEpoch: number,
  gpu: Gpu,
): Omit<LocalTrainResult, 'gpuWaits' | 'params' | 'evaluationFailure' | 'mixedPrecision'> {
  const { step, trainMs } = state;
  return {
    steps: step,
    epochs: Math.floor(step / stepsPerEpoch),
    stepsThisRun: state.completedSteps,
    interrupted: step < (config.steps ?? config.epochs * stepsPerEpoch),
    testAccuracy: state.evaluation.accuracy,
    testLoss: state.evaluation.loss,
    trainLoss: state.lossCount > 0 ? state.trainLoss : state.endedEpochLoss,
    samplesPerS: state.samplesPerS,
    tokensPerS: trainMs > 0 ? (state.tokens / trainMs) * 1000 : 0,
    trainSeconds: trainMs / 1000,
    runtime: detectRuntime(),
    adapter: gpu.info.description,
  };
}
