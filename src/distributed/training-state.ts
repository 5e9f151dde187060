/**
 * Where a ring's training stands, and what it measured on the way: what a
 * checkpoint records, what a late joiner takes from the root, and what the
 * run's result reports.
 *
 * `epochExamples` counts the examples the whole ring took in this epoch, not
 * steps, so the position survives a change of ring size (elastic) as well as
 * a resume.
 */
import { checkpointFromFlat, type TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import type { Model } from '../engine/model.ts';
import type { Optimizer } from '../engine/optimizer.ts';
import type { DistributedTrainConfig } from './trainer-types.ts';

/** One completed step, as the state counts it. */
export interface StepRecord {
  loss: number;
  /** The ring's examples this step (the global batch). */
  ringExamples: number;
  /** This rank's share of them. */
  examples: number;
  /** This rank's counted targets (characters for the words, examples for a classifier). */
  targets: number;
  /** Payload bytes this rank sent for the step's gradients. */
  bytesSent: number;
  /** The step's time on this rank (ms). */
  ms: number;
}

/** What a checkpoint of this state needs beyond the state: the model, its optimizer and the ring it trains on. */
export interface CheckpointParts {
  config: DistributedTrainConfig;
  model: Model;
  optimizer: Optimizer;
  params: Float32Array;
  globalBatch: number;
  ringSize: number;
  /** A text model's vocabulary (its ids mean this text's characters). */
  vocabulary?: string;
}

export class TrainingState {
  // The position: the same on every rank (the root's after each sync).
  step = 0;
  epoch = 0;
  epochExamples = 0;
  /** Steps this rank itself completed in this run (0: its weights are only where it started). */
  completedSteps = 0;
  // The meters.
  trainMs = 0;
  samples = 0;
  ringSamples = 0;
  tokens = 0;
  allreduceBytes = 0;
  /** The losses of this epoch's steps (reset when an epoch ends). */
  lossSum = 0;
  lossCount = 0;
  /** The last evaluation, averaged over the ring (NaN before the first). */
  evaluation = { accuracy: NaN, loss: NaN };

  /** Takes a checkpoint's position (the root, resuming). */
  resumeFrom(c: TrainingCheckpoint): void {
    this.step = c.step;
    this.epoch = c.epoch;
    const recorded = Number(c.extra.epoch_examples);
    this.epochExamples = Number.isFinite(recorded) ? recorded : 0;
  }

  /** The position as the root broadcasts it to every rank. */
  position(): Int32Array {
    return new Int32Array([this.step, this.epoch, this.epochExamples]);
  }

  /** Takes the root's position, as `position()` gave it. */
  takePosition(p: Int32Array): void {
    [this.step, this.epoch, this.epochExamples] = [p[0], p[1], p[2]];
  }

  /** Moves the position by one step of the ring's global batch (the meters follow with `measure`). */
  advance(globalBatch: number): void {
    this.step++;
    this.completedSteps++;
    this.epochExamples += globalBatch;
  }

  /** Adds a completed step to the meters. */
  measure(r: StepRecord): void {
    this.trainMs += r.ms;
    this.samples += r.examples;
    this.ringSamples += r.ringExamples;
    this.tokens += r.targets;
    this.allreduceBytes += r.bytesSent;
    this.lossSum += r.loss;
    this.lossCount++;
  }

  /** The ring's examples per second so far. */
  get samplesPerS(): number {
    return this.trainMs > 0 ? (this.ringSamples / this.trainMs) * 1000 : 0;
  }

  /** The ring's counted targets per second so far (this rank's per example × the ring's examples). */
  get tokensPerS(): number {
    return this.trainMs > 0 && this.samples > 0 ? ((this.tokens / this.samples) * this.ringSamples * 1000) / this.trainMs : 0;
  }

  /** The mean loss of this epoch's steps (NaN when none). */
  get trainLoss(): number {
    return this.lossCount > 0 ? this.lossSum / this.lossCount : NaN;
  }

  /** An epoch ended (after its evaluation). */
  nextEpoch(): void {
    this.epoch++;
    this.epochExamples = 0;
    this.lossSum = 0;
    this.lossCount = 0;
  }

  /** This state as a checkpoint: weights, optimizer state, position, and how the ring trained. */
  async checkpoint(p: CheckpointParts): Promise<TrainingCheckpoint> {
    const { config, model } = p;
    return checkpointFromFlat({
      model: config.model,
      optimizer: config.optimizer,
      step: this.step,
      epoch: this.epoch,
      layout: model.layout,
      params: p.params,
      optimizerState: await p.optimizer.exportState(),
      extra: {
        seed: String(config.seed),
        batch: String(config.batch),
        global_batch: String(p.globalBatch),
        lr: String(config.lr),
        size: String(p.ringSize),
        epoch_examples: String(this.epochExamples),
        model_spec: JSON.stringify(model.spec),
        ...(p.vocabulary ? { vocabulary: p.vocabulary } : {}),
      },
    });
  }
}
