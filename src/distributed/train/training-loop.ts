/**
 * The training loop, one for every run: steps on this peer's share of each
 * global batch in the seeded order, the learning rate of each step, an
 * evaluation and a hand-out (checkpoint, weights) after each epoch and where
 * training stops, and the events on the way. Where training stands is a
 * TrainingState.
 *
 * What differs between training alone and in a ring is a part, `Peers`: how a
 * step's gradients become the update, how often its loss is read, how metrics
 * are averaged, how the peers agree on where they stand. One peer
 * (train-local.ts) applies its gradients where they lie, on the GPU, and lets
 * the losses wait there to read them every few steps; a ring (ring-peers.ts)
 * reads each step's gradients back, checks and sums them over the ring, and
 * gets the step's loss with them. How checkpoints record the position is a
 * second part, `RunRecord`: one peer's and a ring's files differ, and each
 * kind keeps resuming the files it wrote before.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import { now, type EventBus } from '../../core/events.ts';
import { checkpointFromFlat, type TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import { countedTargets, type Dataset } from '../../data/dataset.ts';
import {
  checkShares,
  epochDone,
  EpochOrders,
  rankBatch,
  stepsPerEpoch as stepsPerEpochAt,
} from '../../data/global-batch.ts';
import type { Model } from '../../engine/model.ts';
import type { Optimizer } from '../../engine/optimizer.ts';
import type { DeferredScalars } from '../../gpu/readback.ts';
import type { GradientBucket } from '../../engine/grad-buckets.ts';
import { learningRateAt } from '../api/lr.ts';
import { restore } from './model-fit.ts';
import { endsRun } from '../session/ring-errors.ts';
import { TrainingState } from './training-state.ts';
import type { DistributedTrainArgs, DistributedTrainConfig } from './trainer-types.ts';

/** The settings the loop reads: the batches, the schedule, the limits. */
export type LoopConfig = Pick<
  DistributedTrainConfig,
  | 'model'
  | 'optimizer'
  | 'epochs'
  | 'steps'
  | 'batch'
  | 'globalBatch'
  | 'lr'
  | 'seed'
  | 'sampling'
  | 'lrSchedule'
  | 'warmupSteps'
  | 'warmupFrom'
  | 'scaleLr'
>;

/** The data and the caller's hooks (a ring's trainer takes them all; one peer fewer). */
export type LoopArgs = Pick<
  DistributedTrainArgs,
  | 'train'
  | 'test'
  | 'resume'
  | 'resumeName'
  | 'initialParams'
  | 'onCheckpoint'
  | 'onRecovery'
  | 'onWeights'
  | 'onStep'
  | 'onEvaluate'
  | 'shouldStop'
> & {
  config: LoopConfig;
};

export type RankBatch = ReturnType<typeof rankBatch>;

/** A step whose forward and backward are recorded: what its update needs. */
export interface StepUpdate {
  batch: RankBatch;
  /** The batch's counted targets (what weighs a rank's gradient in the ring's sum). */
  targets: number;
  lr: number;
  step: number;
  globalBatch: number;
  /** When the step's compute began (now()). */
  computeStart: number;
  /** The step's gradients, read back bucket by bucket as backward finishes them (when the peers asked: Peers.bucketBytes). */
  buckets?: readonly GradientBucket[];
}

/** What a part may ask of the loop: where training stands, and sizing the loop to the ring (its global batch back). */
export interface LoopHandle {
  readonly state: TrainingState;
  fit(): number;
}

/** The peers a loop trains with: one peer alone, or a ring. */
export interface Peers {
  readonly rank: number;
  readonly size: number;
  /** How messages name this peer ('rank 2'); '' alone. */
  readonly name: string;
  /** Steps whose losses may wait on the GPU before the loop reads them. */
  readonly readEvery: number;
  /** Payload bytes sent so far (the train-step events carry them). */
  readonly bytesSent: number;
  /** Every rank's share of the next step's global batch. */
  readonly shares: readonly number[];
  /** Before the first step (the root has taken a resumed position): the peers agree on the position and weights, and size the loop (`loop.fit`). */
  start(loop: LoopHandle): Promise<void>;
  /** Runs `work`; false when the ring re-formed under it (it must then be done again). */
  guarded(work: () => Promise<void>): Promise<boolean>;
  /** Between steps: a ring whose membership changed re-forms. */
  membershipChanged(): Promise<void>;
  /** Bytes per gradient bucket when the peers reduce a step's gradients as backward finishes them (overlap.ts); undefined: read them whole. */
  bucketBytes?(): number | undefined;
  /** Where the buckets are read back to (flatLength floats), so no bucket comes in an array of its own; undefined: anywhere. */
  bucketTarget?(): Float32Array | undefined;
  /** Updates the weights with the recorded step's gradients (under f16-mixed, unless they overflowed: `scaling`). */
  apply(s: StepUpdate): Promise<{ bytesSent: number; scaling?: StepScaling }>;
  /** After a step's update, before it is reported. */
  afterStep(examples: number): Promise<void>;
  /** The test set's metrics at these weights (a ring: every rank's part, averaged). */
  evaluate(): Promise<{ accuracy: number; loss: number }>;
  /** Before a hand-out that comes ahead of its evaluation: the peers settle on the weights they hand out (local SGD ends its round). */
  settle?(): Promise<void>;
  /** After each step (`end` false) and before the hand-out where training stops (true): the peers check, when due, that they hold one state. */
  checkState?(step: number, end: boolean): Promise<void>;
}

/** How checkpoints record where training stands, and how a resume reads it back. */
export interface RunRecord {
  /** The checkpoint's epoch and metadata at this state. */
  describe(state: TrainingState, globalBatch: number): { epoch: number; extra: Record<string, string> };
  /** Takes a resumed checkpoint's position (on the root, before the peers agree on it). */
  resume(state: TrainingState, c: TrainingCheckpoint): void;
  /** Whether a run that took no step hands out at its end (its weights, its checkpoint again). */
  handsOutUntrained: boolean;
}

export interface LoopParts {
  peers: Peers;
  record: RunRecord;
  model: Model;
  /** The optimizer whose state checkpoints carry (local SGD's carries its outer state too). */
  optimizer: Optimizer;
  /** The steps' losses, recorded on the GPU as they are computed. */
  losses: DeferredScalars;
  bus?: EventBus;
}

/** A step under dynamic loss scaling (--precision f16-mixed): the scale it ran with, and whether its update was skipped. */
export interface StepScaling {
  lossScale: number;
  skipped: boolean;
}

/** A step taken whose loss is not read yet. */
interface UnreadStep {
  step: number;
  epoch: number;
  examples: number;
  ringExamples: number;
  targets: number;
  bytesSent: number;
  scaling?: StepScaling;
}

interface ReadSteps {
  steps: UnreadStep[];
  losses: number[];
}

export class TrainingLoop implements LoopHandle {
  readonly state = new TrainingState();
  private readonly config: LoopConfig;
  private readonly orders = new EpochOrders();
  // What depends on the ring: refitted whenever the peers agree on a position.
  private globalBatch = 0;
  private stepsPerEpoch = 0;
  private unread: UnreadStep[] = [];
  /** When the first unread step began: the steps' time is counted when their losses are read. */
  private since = 0;
  /**
   * The last state known to be sound: evaluated with a finite loss, every weight finite. A run that
   * diverges offers this one, not its last step: the steps before a loss or a gradient turned
   * non-finite already moved the weights far off (1e17 was seen), finite or not.
   */
  private lastSound: TrainingCheckpoint | undefined;
  /** Why the last evaluation failed (undefined when it did not): the run goes on, its metrics are NaN. */
  evaluationFailure: RingtrainError | undefined;

  constructor(
    private readonly args: LoopArgs,
    private readonly parts: LoopParts,
  ) {
    this.config = args.config;
  }

  /** Trains to the step or epoch limit, or until stopped; an error is thrown as it is (`recover` hands out what the run had). */
  async run(): Promise<void> {
    const { resume, initialParams } = this.args;
    if (!resume && initialParams && this.parts.peers.rank === 0) {
      const { model } = this.parts;
      model.writeParams(initialParams(model));
    }
    if (resume && this.parts.peers.rank === 0) {
      await restore(
        this.parts.model,
        this.parts.optimizer,
        resume,
        this.config,
        this.args.resumeName ?? 'checkpoint',
        this.args.train,
      );
      this.parts.record.resume(this.state, resume);
    }
    await this.parts.peers.start(this);
    await this.loop();
    await this.finish();
  }

  /** What depends on the ring's size: the global batch and the steps of an epoch. */
  fit(): number {
    const { config } = this;
    const { train } = this.args;
    const { size } = this.parts.peers;
    this.globalBatch = config.globalBatch ?? size * config.batch;
    checkShares(this.globalBatch, size);
    this.stepsPerEpoch = stepsPerEpochAt(train.count, this.globalBatch);
    if (this.stepsPerEpoch === 0) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `a global batch of ${this.globalBatch} is larger than the ${train.count} training examples; use a smaller batch.`,
        { globalBatch: this.globalBatch, examples: train.count },
      );
    }
    return this.globalBatch;
  }

  /** Steps, and an evaluation at each epoch's end, until the step or epoch limit or a stop; a step the ring broke under is taken again on the re-formed ring. */
  private async loop(): Promise<void> {
    const { config, state } = this;
    const { peers } = this.parts;
    const stepLimit = config.steps ?? Infinity;
    const epochLimit = config.steps === undefined ? config.epochs : Infinity;
    while (state.step < stepLimit && state.epoch < epochLimit && !this.stopped()) {
      if (this.epochEnded()) {
        if (!(await peers.guarded(() => this.evaluate()))) continue;
        state.nextEpoch();
        await this.handOut();
        continue;
      }
      if (!(await peers.guarded(() => this.step()))) continue;
      if (state.step >= stepLimit || this.stopped()) break;
      await peers.membershipChanged();
    }
  }

  /**
   * Where training stopped: the hand-out first (the checkpoint, the weights), then the evaluation,
   * so that an evaluation that fails, or a process killed during it, never takes the run's
   * weights with it. A run that took no step after its last evaluation has handed out already.
   */
  private async finish(): Promise<void> {
    const { state } = this;
    await this.drain();
    const trained = state.lossCount > 0;
    if (!trained && !Number.isNaN(state.evaluation.accuracy)) return;
    if (trained || this.parts.record.handsOutUntrained) {
      const { peers } = this.parts;
      const { settle, checkState } = peers;
      if (settle)
        while (!(await peers.guarded(() => settle.call(peers)))) {
          // the ring re-formed while settling: settle on the new one
        }
      // What is handed out is what every rank holds: the ring re-formed under the check? Check the new one.
      if (checkState)
        while (!(await peers.guarded(() => checkState.call(peers, state.step, true)))) {
          // the ring re-formed under the check (every rank took the root's state): check the new ring
        }
      // Not kept as the last sound state: nothing after this evaluation could hand it out, and a
      // whole checkpoint held through it cost a worker three copies of the weights at its peak.
      await this.handOut({ sound: false });
    }
    while (!(await this.parts.peers.guarded(() => this.evaluate()))) {
      // the ring re-formed during the evaluation: evaluate again on the new one
    }
  }

  private stopped(): boolean {
    return this.args.shouldStop?.() === true;
  }

  /** Whether this epoch's examples are taken (drawn with replacement: as many steps as full global batches fit). */
  private epochEnded(): boolean {
    const { epochExamples } = this.state;
    if (this.config.sampling === 'replacement')
      return Math.floor(epochExamples / this.globalBatch) >= this.stepsPerEpoch;
    return epochDone(this.args.train.count, { global: this.globalBatch, epochExamples });
  }

  private learningRate(step: number): number {
    const { config } = this;
    const totalSteps = config.steps ?? config.epochs * this.stepsPerEpoch;
    const schedule = {
      baseLr: config.lr,
      size: this.parts.peers.size,
      warmupSteps: config.warmupSteps,
      warmupFrom: config.warmupFrom,
      scaleBySize: config.scaleLr ?? false,
      decay: config.lrSchedule,
      totalSteps,
    };
    return learningRateAt(schedule, step);
  }

  /** One step on this peer's part of the global batch: compute, the peers' update, and its loss read now or a few steps on. */
  private async step(): Promise<void> {
    const { config, state, globalBatch } = this;
    const { peers, model, losses, bus } = this.parts;
    const began = now();
    if (this.unread.length === 0) this.since = began;
    // The ranks' batches at this step together are the one global batch at this position.
    const at = {
      global: globalBatch,
      epochExamples: state.epochExamples,
      shares: peers.shares,
      rank: peers.rank,
      seed: config.seed,
      epoch: state.epoch,
      replacement: config.sampling === 'replacement',
    };
    const batch = rankBatch(this.args.train, at, this.orders);
    const computeStart = now();
    bus?.emit({ type: 'compute-begin', t: computeStart, rank: peers.rank, step: state.step });
    // Recorded in pieces when the peers overlap backward with the sum: each bucket's read-back starts as backward
    // finishes it.
    const bucketBytes = model.forwardBackwardBuckets ? peers.bucketBytes?.() : undefined;
    const buckets =
      bucketBytes !== undefined
        ? model.forwardBackwardBuckets!(batch.x, batch.labels, undefined, losses, bucketBytes, peers.bucketTarget?.())
        : undefined;
    if (!buckets) model.forwardBackwardDeferred(batch.x, batch.labels, undefined, losses);
    bus?.emit({ type: 'compute-end', t: now(), rank: peers.rank, step: state.step });
    const targets = countedTargets(batch.labels);
    const r = await peers.apply({
      batch,
      targets,
      lr: this.learningRate(state.step),
      step: state.step,
      globalBatch,
      computeStart,
      buckets,
    });
    this.unread.push({
      step: state.step,
      epoch: state.epoch,
      examples: batch.size,
      ringExamples: globalBatch,
      targets,
      bytesSent: r.bytesSent,
      scaling: r.scaling,
    });
    // A ring's gradient read carried the loss: it is checked before the step counts. Alone, the losses wait.
    const read = this.unread.length >= peers.readEvery ? await this.readLosses() : undefined;
    state.advance(globalBatch);
    await peers.afterStep(batch.size);
    if (read) this.report(read);
    // The step is done and told; a check that fails now fails no step.
    await peers.checkState?.(state.step, false);
  }

  /** Reports the steps whose losses are not read yet (before an evaluation, and at the end). */
  private async drain(): Promise<void> {
    if (this.unread.length > 0) this.report(await this.readLosses());
  }

  /** The unread steps' losses (one GPU wait at most, none when a read carried them); a non-finite one ends the run, after the steps before it are reported. */
  private async readLosses(): Promise<ReadSteps> {
    const steps = this.unread;
    this.unread = [];
    // A step taken again after the ring broke left its first try's loss before these.
    const losses = (await this.parts.losses.collect()).slice(-steps.length);
    const bad = steps.findIndex((_, i) => !Number.isFinite(losses[i] ?? NaN));
    if (bad < 0) return { steps, losses };
    this.report({ steps: steps.slice(0, bad), losses });
    throw this.diverged(steps[bad].step, losses[bad] ?? NaN);
  }

  private diverged(step: number, loss: number): RingtrainError {
    const { name, rank } = this.parts.peers;
    const lr = this.config.lr;
    return new RingtrainError(
      ErrorCode.InvalidArgument,
      `${name ? `${name}: ` : ''}the training loss became ${loss} at step ${step}: the run diverged; lower --lr (now ${lr}).`,
      { step, rank, lr, diverged: true },
    );
  }

  /** Counts read steps in the meters, and sends each out as an event and to onStep. */
  private report({ steps, losses }: ReadSteps): void {
    const { state } = this;
    const { rank, size, bytesSent } = this.parts.peers;
    const t = now();
    state.addTime(t - this.since);
    this.since = t;
    steps.forEach((s, i) => {
      const loss = losses[i];
      state.measure({
        loss,
        ringExamples: s.ringExamples,
        examples: s.examples,
        targets: s.targets,
        bytesSent: s.bytesSent,
      });
      const { samplesPerS } = state;
      const [step, epoch, samples] = [s.step + 1, s.epoch, s.examples];
      const scaling = s.scaling ? { lossScale: s.scaling.lossScale, skipped: s.scaling.skipped } : {};
      this.parts.bus?.emit({
        type: 'train-step',
        ...{ t, rank, size, step, epoch, loss, samples, samplesPerS, bytesSent },
        ...scaling,
      });
      this.args.onStep?.({ step, epoch, loss, samplesPerS, bytesSent, samples });
    });
  }

  /**
   * The test set's metrics at these weights. An evaluation that fails (a limit of this adapter, a
   * bad validation set) is a measurement lost, not the run: it is kept in `evaluationFailure`, the
   * metrics are NaN, and training goes on. A ring that broke under it is the ring's business.
   */
  private async evaluate(): Promise<void> {
    await this.drain();
    const { state } = this;
    let metrics: { accuracy: number; loss: number };
    try {
      metrics = await this.parts.peers.evaluate();
    } catch (err) {
      if (endsRun(err)) throw err;
      this.evaluationFailure = isRingtrainError(err)
        ? err
        : new RingtrainError(ErrorCode.InvalidArgument, `the evaluation failed: ${String(err)}`, undefined, {
            cause: err,
          });
      state.evaluation = { accuracy: NaN, loss: NaN };
      return;
    }
    this.evaluationFailure = undefined;
    state.evaluation = metrics;
    const e = { step: state.step, epoch: state.epoch, testAccuracy: metrics.accuracy, testLoss: metrics.loss };
    this.parts.bus?.emit({ type: 'evaluate', t: now(), rank: this.parts.peers.rank, ...e });
    this.args.onEvaluate?.(e);
  }

  private async checkpointOf(params: Float32Array): Promise<TrainingCheckpoint> {
    const { config, state } = this;
    const { model, optimizer, record } = this.parts;
    const { epoch, extra } = record.describe(state, this.globalBatch);
    return checkpointFromFlat({
      model: config.model,
      optimizer: config.optimizer,
      step: state.step,
      epoch,
      layout: model.layout,
      params,
      optimizerState: await optimizer.exportState(),
      extra,
    });
  }

  /**
   * The root checkpoints, every peer shares its weights and keeps them as sound; one read-back
   * serves all. After an evaluation the weights are sound when it found them so; ahead of one
   * (`sound: false`, where training stops) they are not kept.
   */
  private async handOut(o: { sound: boolean } = { sound: true }): Promise<void> {
    const { onCheckpoint, onWeights, onRecovery } = this.args;
    const checkpoint = this.parts.peers.rank === 0 ? onCheckpoint : undefined;
    if (!checkpoint && !onWeights && !onRecovery) return;
    const { step, epoch } = this.state;
    const params = await this.parts.model.readParams();
    // A checkpoint (the optimizer's state read back, the weights copied by tensor) only where one is
    // written or kept as the last sound state.
    const keep = o.sound && onRecovery !== undefined;
    const state = checkpoint || keep ? await this.checkpointOf(params) : undefined;
    if (keep) this.keepIfSound(state!, params);
    if (checkpoint) await checkpoint(state!);
    // checkpointFromFlat copied what it keeps, so the hook may have this array.
    await onWeights?.({ step, epoch, params });
  }

  /** Keeps `state` as the last sound one when its evaluation's loss and every weight are finite. */
  private keepIfSound(state: TrainingCheckpoint, params: Float32Array): void {
    if (Number.isFinite(this.state.evaluation.loss) && params.every(Number.isFinite)) this.lastSound = state;
  }

  /** The run ended with `err`: hand the last completed step to onRecovery (and onWeights), or say why not. */
  async recover(err: RingtrainError): Promise<string | undefined> {
    const { step, epoch, completedSteps } = this.state;
    if (completedSteps === 0)
      return `rank ${this.parts.peers.rank} completed no step in this run, so it holds only the weights it started from`;
    const params = await this.parts.model.readParams();
    // A diverged run (this rank's loss or gradient, or a peer's abort saying so): back to the last sound state.
    if (err.detail?.diverged === true || !params.every(Number.isFinite)) {
      if (!this.lastSound)
        return `the run diverged at step ${step} before any step this run evaluated, so no weights of it are worth resuming; start again with a lower --lr`;
      await this.args.onRecovery?.(this.lastSound, err);
      return undefined;
    }
    await this.args.onRecovery?.(await this.checkpointOf(params), err);
    await this.args.onWeights?.({ step, epoch, params });
    return undefined;
  }
}
