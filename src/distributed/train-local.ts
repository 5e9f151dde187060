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
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type EventBus, now } from '../core/events.ts';
import { detectRuntime } from '../core/runtime.ts';
import { checkOptimizerState, checkpointFromFlat, flatParamsFor, type TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import { batchCount, batches } from '../data/batches.ts';
import type { Dataset } from '../data/dataset.ts';
import { createModel, createOptimizer, type Model, type ModelSpec, type Optimizer } from '../engine/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { learningRateAt, type LrSchedule } from './lr.ts';

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
}

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
  trainSeconds: number;
  runtime: string;
  adapter: string;
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

export function modelSpecFor(config: LocalTrainConfig, data: Dataset): ModelSpec {
  if (config.model === 'cnn') {
    if (data.height !== 28 || data.width !== 28) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `the CNN is built for 28×28 images, the data has ${data.height}×${data.width}; use --model mlp.`);
    }
    return { kind: 'cnn', seed: config.seed, classes: data.classes };
  }
  if (config.model === 'mlp') return { kind: 'mlp', seed: config.seed, inputSize: data.height * data.width, classes: data.classes };
  // A registered model (a model file): its factory fixes the shapes.
  return { kind: config.model, seed: config.seed } as unknown as ModelSpec;
}

/** Loads a checkpoint's weights and optimizer state, after checking they belong to this model and optimizer. */
export async function restore(model: Model, optimizer: Optimizer, c: TrainingCheckpoint, config: LocalTrainConfig, name: string): Promise<void> {
  const flat = flatParamsFor(c, { model: config.model, optimizer: config.optimizer, layout: model.layout, flatLength: model.flatLength }, name);
  const fresh = await optimizer.exportState();
  checkOptimizerState(c, Object.fromEntries(Object.entries(fresh).map(([k, v]) => [k, v.length])), name);
  model.writeParams(flat);
  optimizer.importState(c.optimizerState);
}

export async function trainLocal(args: LocalTrainArgs): Promise<LocalTrainResult> {
  const { gpu, train, test, config, bus } = args;
  const stepsPerEpoch = batchCount(train.count, config.batch);
  if (stepsPerEpoch === 0) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--batch ${config.batch} is larger than the ${train.count} training examples; use a smaller batch.`);
  }
  const totalSteps = config.steps ?? config.epochs * stepsPerEpoch;
  const model = createModel(gpu, modelSpecFor(config, train));
  const optimizer = createOptimizer(model, { kind: config.optimizer, lr: config.lr, momentum: config.momentum, weightDecay: config.weightDecay });
  try {
    if (args.resume) await restore(model, optimizer, args.resume, config, args.resumeName ?? 'checkpoint');
    let step = args.resume?.step ?? 0;
    const startStep = step;
    let trainMs = 0;
    let samples = 0;
    let lossSum = 0;
    let lossCount = 0;
    let evaluation = { accuracy: NaN, loss: NaN };

    const checkpoint = async (): Promise<void> => {
      if (!args.onCheckpoint) return;
      const params = await model.readParams();
      await args.onCheckpoint(
        checkpointFromFlat({
          model: config.model,
          optimizer: config.optimizer,
          step,
          epoch: Math.floor(step / stepsPerEpoch),
          layout: model.layout,
          params,
          optimizerState: await optimizer.exportState(),
          extra: {
            seed: String(config.seed),
            batch: String(config.batch),
            lr: String(config.lr),
            lr_schedule: config.lrSchedule ?? 'constant',
            model_spec: JSON.stringify(model.spec),
          },
        }),
      );
    };
    const evaluate = async (epoch: number): Promise<void> => {
      evaluation = await model.evaluate(test.images, test.labels);
      bus?.emit({ type: 'evaluate', t: now(), rank: 0, step, epoch, testAccuracy: evaluation.accuracy, testLoss: evaluation.loss });
    };

    const stopped = () => args.signal?.aborted === true;
    // The schedule depends only on the step, so a resumed run continues the same curve.
    const schedule: LrSchedule = { baseLr: config.lr, size: 1, scaleBySize: false, decay: config.lrSchedule ?? 'constant', totalSteps };
    while (step < totalSteps && !stopped()) {
      const epoch = Math.floor(step / stepsPerEpoch);
      const startBatch = step % stepsPerEpoch;
      lossSum = 0;
      lossCount = 0;
      for (const b of batches(train, { batchSize: config.batch, seed: config.seed, epoch, startBatch })) {
        const t0 = now();
        bus?.emit({ type: 'compute-begin', t: t0, rank: 0, step });
        const loss = await model.forwardBackward(b.x, b.labels);
        if (!Number.isFinite(loss)) {
          throw new RingtrainError(ErrorCode.InvalidArgument, `the training loss became ${loss} at step ${step}: the run diverged; lower --lr (now ${config.lr}).`, { step, lr: config.lr });
        }
        optimizer.step(learningRateAt(schedule, step));
        step++;
        const t1 = now();
        bus?.emit({ type: 'compute-end', t: t1, rank: 0, step });
        trainMs += t1 - t0;
        samples += b.size;
        lossSum += loss;
        lossCount++;
        bus?.emit({ type: 'train-step', t: t1, rank: 0, size: 1, step, epoch, loss, samples: b.size, samplesPerS: (samples / trainMs) * 1000, bytesSent: 0 });
        if (step >= totalSteps || stopped()) break;
      }
      if (step % stepsPerEpoch === 0 || step >= totalSteps || stopped()) {
        await evaluate(epoch);
        await checkpoint();
      }
    }
    if (Number.isNaN(evaluation.accuracy)) await evaluate(Math.floor(step / stepsPerEpoch)); // nothing left to train after a resume
    return {
      steps: step,
      epochs: Math.floor(step / stepsPerEpoch),
      stepsThisRun: step - startStep,
      interrupted: step < totalSteps,
      testAccuracy: evaluation.accuracy,
      testLoss: evaluation.loss,
      trainLoss: lossCount > 0 ? lossSum / lossCount : NaN,
      samplesPerS: trainMs > 0 ? (samples / trainMs) * 1000 : 0,
      trainSeconds: trainMs / 1000,
      runtime: detectRuntime(),
      adapter: gpu.info.description,
    };
  } finally {
    optimizer.destroy();
    model.destroy();
  }
}
