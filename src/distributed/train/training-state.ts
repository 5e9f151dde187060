/**
 * Where training stands, and what it measured on the way: what a checkpoint
 * records, what a late joiner takes from the root, and what the run's result
 * reports. One peer training alone keeps the same state, as a ring of one.
 *
 * `epochExamples` counts the examples the whole ring took in this epoch, not
 * steps, so the position survives a change of ring size (elastic) as well as
 * a resume.
 */
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';

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
  /** The mean loss of the last epoch that ended (NaN before one did). */
  endedEpochLoss = NaN;
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

  /**
   * Takes the position of `step` when it alone says where training stands (one peer's
   * checkpoints record no more): whole epochs of `stepsPerEpoch` steps, then that many batches.
   */
  resumeAtStep(step: number, stepsPerEpoch: number, globalBatch: number): void {
    this.step = step;
    this.epoch = Math.floor(step / stepsPerEpoch);
    this.epochExamples = (step % stepsPerEpoch) * globalBatch;
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

  /** Adds a completed step to the meters (its time comes with `addTime`, a few steps' at once when their losses are read together). */
  measure(r: StepRecord): void {
    this.samples += r.examples;
    this.ringSamples += r.ringExamples;
    this.tokens += r.targets;
    this.allreduceBytes += r.bytesSent;
    this.lossSum += r.loss;
    this.lossCount++;
  }

  addTime(ms: number): void {
    this.trainMs += ms;
  }

  /** The ring's examples per second so far. */
  get samplesPerS(): number {
    return this.trainMs > 0 ? (this.ringSamples / this.trainMs) * 1000 : 0;
  }

  /** The ring's counted targets per second so far (this rank's per example × the ring's examples). */
  get tokensPerS(): number {
    return this.trainMs > 0 && this.samples > 0
      ? ((this.tokens / this.samples) * this.ringSamples * 1000) / this.trainMs
      : 0;
  }

  /** The mean loss of this epoch's steps (NaN when none). */
  get trainLoss(): number {
    return this.lossCount > 0 ? this.lossSum / this.lossCount : NaN;
  }

  /** An epoch ended (after its evaluation). */
  nextEpoch(): void {
    this.endedEpochLoss = this.trainLoss;
    this.epoch++;
    this.epochExamples = 0;
    this.lossSum = 0;
    this.lossCount = 0;
  }
}
