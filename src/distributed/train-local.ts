/**
 * Training on one peer: epochs of seeded mini-batches through the engine's
 * model and optimizer, test accuracy after each epoch, checkpoints, and
 * RingEvents for whoever watches (the CLI's progress bar, the page).
 *
 * Runtime-agnostic (no files, no process): the caller loads the data, writes
 * checkpoints where it likes, and renders the events.
 *
 * Steps are counted from the start of training, across resumes: a checkpoint
 * at step s resumes at epoch ⌊s / stepsPerEpoch⌋, batch s mod stepsPerEpoch of
 * the same seeded order, so a run stopped and resumed takes the same steps as
 * one that never stopped.
 *
 * The loop never waits for the GPU per step: each step's loss is recorded
 * into a DeferredScalars and read every `readEvery` steps (default 10) and
 * before each evaluation, so the queue stays full and a runtime with a slow
 * GPU→CPU round trip (Deno: ~11 ms) pays it once per K steps. The per-step
 * events go out when their losses arrive.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type EventBus, now } from '../core/events.ts';
import { detectRuntime } from '../core/runtime.ts';
import { checkpointFromFlat, type TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import { batchCount, batches } from '../data/batches.ts';
import { countedTargets, type Dataset } from '../data/dataset.ts';
import { createModel, createOptimizer, trainStepDeferred, type Model, type Optimizer } from '../engine/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { learningRateAt, type LrSchedule } from './lr.ts';
import { checkDataFits, modelSpecFor, restore } from './model-fit.ts';

// The model a config builds: what a caller rebuilds to load a run's checkpoints (the page does).
export { modelSpecFor } from './model-fit.ts';

export interface LocalTrainConfig {
  /** 'mlp', 'cnn', or a registered model's name (a model file's, see src/engine/define.ts). */
  model: string;
  optimizer: 'sgd' | 'adamw';
  epochs: number;
  batch: number;
  lr: number;
  momentum: number;
  weightDecay: number;
  seed: number;
  /** Stop at this step (counted from the start of training); overrides epochs. */
  steps?: number;
  /** 'cosine' anneals the learning rate to zero by the last step (default 'constant'). */
  lrSchedule?: 'constant' | 'cosine';
  /** Read the recorded losses every this many steps (default 10); evaluations read them too. */
  readEvery?: number;
  /** Steps of linear warm-up from zero to lr (default 0). */
  warmupSteps?: number;
  /** 'replacement': every batch drawn uniformly at random with replacement (the words workload); default 'epochs'. */
  sampling?: 'epochs' | 'replacement';
  /** Options for the model (`--model-options`): a model file's factory gets them; a built-in model's spec takes them (mlp: hidden, activation). */
  modelOptions?: Record<string, unknown>;
}

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
  runtime: string;
  adapter: string;
  /** GPU→CPU waits during the run (Gpu.waits), evaluations and checkpoints included. */
  gpuWaits: number;
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
}

export async function trainLocal(args: LocalTrainArgs): Promise<LocalTrainResult> {
  const { gpu, train, config } = args;
  const stepsPerEpoch = batchCount(train.count, config.batch);
  if (stepsPerEpoch === 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--batch ${config.batch} is larger than the ${train.count} training examples; use a smaller batch.`);
  }
  const readEvery = config.readEvery ?? DEFAULT_READ_EVERY;
  if (!Number.isInteger(readEvery) || readEvery < 1) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `readEvery must be a positive whole number of steps, got ${readEvery}`, { readEvery });
  }
  const waitsBefore = gpu.waits;
  const model = createModel(gpu, modelSpecFor(config, train));
  try {
    checkDataFits(model, train);
  } catch (err) {
    model.destroy();
    throw err;
  }
  const optimizer = createOptimizer(model, { kind: config.optimizer, lr: config.lr, momentum: config.momentum, weightDecay: config.weightDecay });
  const losses = new DeferredScalars(gpu, readEvery);
  try {
    if (args.resume) await restore(model, optimizer, args.resume, config, args.resumeName ?? 'checkpoint', train);
    const run = new LocalRun(args, { model, optimizer, losses, stepsPerEpoch, readEvery }, args.resume?.step ?? 0);
    await run.train();
    return { ...run.result(), gpuWaits: gpu.waits - waitsBefore };
  } finally {
    losses.destroy();
    optimizer.destroy();
    model.destroy();
  }
}

/** What a single-peer run trains with (trainLocal builds them and destroys them after). */
interface LocalParts {
  model: Model;
  optimizer: Optimizer;
  /** The steps' losses, recorded on the GPU and read every `readEvery` steps. */
  losses: DeferredScalars;
  stepsPerEpoch: number;
  readEvery: number;
}

/**
 * One peer's run: its position (steps from the start of training, across resumes), its meters,
 * and the steps whose losses are recorded but not read yet.
 *
 * Why not trainDistributed's loop at a ring of one: this one never waits for the GPU per step
 * (losses are read every `readEvery` steps, gradients never leave the GPU), derives the epoch
 * from the step alone, reports the last epoch's mean loss, and writes checkpoints that record
 * its learning-rate schedule rather than a ring's global batch and position. The ring's loop
 * reads every step's gradients back to sum them over the ring; folding this run into it would
 * change the checkpoints, the result and the per-step GPU waits that `ringtrain train` reports.
 */
class LocalRun {
  private readonly config: LocalTrainConfig;
  private readonly totalSteps: number;
  /** The schedule depends only on the step, so a resumed run continues the same curve. */
  private readonly schedule: LrSchedule;
  private readonly startStep: number;
  private trainMs = 0;
  private samples = 0;
  private tokens = 0;
  private lossSum = 0;
  private lossCount = 0;
  private evaluation = { accuracy: NaN, loss: NaN };
  /** Steps recorded whose losses are not read yet: [step after it, epoch, samples]. */
  private unread: { step: number; epoch: number; samples: number }[] = [];
  private since = now();

  constructor(
    private readonly args: LocalTrainArgs,
    private readonly parts: LocalParts,
    private step: number,
  ) {
    this.config = args.config;
    this.startStep = step;
    this.totalSteps = this.config.steps ?? this.config.epochs * parts.stepsPerEpoch;
    const { config } = this;
    this.schedule = { baseLr: config.lr, size: 1, scaleBySize: false, decay: config.lrSchedule ?? 'constant', totalSteps: this.totalSteps, warmupSteps: config.warmupSteps ?? 0, warmupFrom: 'zero' };
  }

  private stopped(): boolean {
    return this.args.signal?.aborted === true;
  }

  async train(): Promise<void> {
    const { stepsPerEpoch } = this.parts;
    while (this.step < this.totalSteps && !this.stopped()) {
      const epoch = Math.floor(this.step / stepsPerEpoch);
      this.lossSum = 0;
      this.lossCount = 0;
      this.since = now();
      await this.trainEpoch(epoch, this.step % stepsPerEpoch);
      await this.drain();
      if (this.step % stepsPerEpoch === 0 || this.step >= this.totalSteps || this.stopped()) {
        await this.evaluate(epoch);
        await this.checkpoint();
      }
    }
    if (Number.isNaN(this.evaluation.accuracy)) await this.evaluate(Math.floor(this.step / stepsPerEpoch)); // nothing left to train after a resume
  }

  /** The epoch's steps from `startBatch`, until it ends, the run's last step, or a stop. */
  private async trainEpoch(epoch: number, startBatch: number): Promise<void> {
    const { config, args } = this;
    const { model, optimizer, losses, readEvery } = this.parts;
    for (const b of batches(args.train, { batchSize: config.batch, seed: config.seed, epoch, startBatch, replacement: config.sampling === 'replacement' })) {
      args.bus?.emit({ type: 'compute-begin', t: now(), rank: 0, step: this.step });
      trainStepDeferred(model, optimizer, b.x, b.labels, losses, learningRateAt(this.schedule, this.step));
      this.step++;
      // Recorded, not finished: the GPU runs behind until the next drain.
      args.bus?.emit({ type: 'compute-end', t: now(), rank: 0, step: this.step });
      this.tokens += countedTargets(b.labels);
      this.unread.push({ step: this.step, epoch, samples: b.size });
      if (this.unread.length >= readEvery) await this.drain();
      if (this.step >= this.totalSteps || this.stopped()) break;
    }
  }

  /** Reads the recorded losses (one wait), checks them, and emits their train-step events. */
  private async drain(): Promise<void> {
    if (this.unread.length === 0) return;
    const values = await this.parts.losses.collect();
    const t = now();
    this.trainMs += t - this.since;
    this.since = t;
    this.unread.forEach((u, i) => {
      const loss = values[i];
      if (!Number.isFinite(loss)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `the training loss became ${loss} at step ${u.step - 1}: the run diverged; lower --lr (now ${this.config.lr}).`, { step: u.step - 1, lr: this.config.lr });
      }
      this.samples += u.samples;
      this.lossSum += loss;
      this.lossCount++;
      this.args.bus?.emit({ type: 'train-step', t, rank: 0, size: 1, step: u.step, epoch: u.epoch, loss, samples: u.samples, samplesPerS: this.trainMs > 0 ? (this.samples / this.trainMs) * 1000 : 0, bytesSent: 0 });
    });
    this.unread = [];
  }

  private async evaluate(epoch: number): Promise<void> {
    const { test, bus } = this.args;
    this.evaluation = await this.parts.model.evaluate(test.inputs, test.labels);
    bus?.emit({ type: 'evaluate', t: now(), rank: 0, step: this.step, epoch, testAccuracy: this.evaluation.accuracy, testLoss: this.evaluation.loss });
  }

  private async checkpoint(): Promise<void> {
    const { config, args } = this;
    const { model, optimizer, stepsPerEpoch } = this.parts;
    if (!args.onCheckpoint) return;
    const params = await model.readParams();
    await args.onCheckpoint(
      checkpointFromFlat({
        model: config.model,
        optimizer: config.optimizer,
        step: this.step,
        epoch: Math.floor(this.step / stepsPerEpoch),
        layout: model.layout,
        params,
        optimizerState: await optimizer.exportState(),
        extra: {
          seed: String(config.seed),
          batch: String(config.batch),
          lr: String(config.lr),
          lr_schedule: config.lrSchedule ?? 'constant',
          model_spec: JSON.stringify(model.spec),
          ...(args.train.vocabulary ? { vocabulary: args.train.vocabulary } : {}),
        },
      }),
    );
  }

  result(): Omit<LocalTrainResult, 'gpuWaits'> {
    const { step } = this;
    const { stepsPerEpoch } = this.parts;
    return {
      steps: step,
      epochs: Math.floor(step / stepsPerEpoch),
      stepsThisRun: step - this.startStep,
      interrupted: step < this.totalSteps,
      testAccuracy: this.evaluation.accuracy,
      testLoss: this.evaluation.loss,
      trainLoss: this.lossCount > 0 ? this.lossSum / this.lossCount : NaN,
      samplesPerS: this.trainMs > 0 ? (this.samples / this.trainMs) * 1000 : 0,
      tokensPerS: this.trainMs > 0 ? (this.tokens / this.trainMs) * 1000 : 0,
      trainSeconds: this.trainMs / 1000,
      runtime: detectRuntime(),
      adapter: this.args.gpu.info.description,
    };
  }
}
