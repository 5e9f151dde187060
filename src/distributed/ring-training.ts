/**
 * The training loop of one rank of a ring (trainer.ts builds its parts):
 * epochs of steps on this rank's share of each global batch, an evaluation
 * and a hand-out of the weights after each epoch, and what happens when the
 * run ends with an error. Where training stands is a TrainingState; the ring,
 * and how it re-forms, is an ElasticRing: after each re-form every rank takes
 * the root's position, weights and optimizer state, and the loop carries on.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../core/errors.ts';
import type { Communicator } from '../comm/interface.ts';
import { now, type EventBus } from '../core/events.ts';
import { detectRuntime } from '../core/runtime.ts';
import type { TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import { broadcast } from '../collectives/broadcast.ts';
import { countedTargets, type Dataset } from '../data/dataset.ts';
import { checkShares, epochDone, EpochOrders, rankBatch, stepsPerEpoch as stepsPerEpochAt, testShard } from '../data/global-batch.ts';
import type { Model } from '../engine/model.ts';
import type { DeferredScalars } from '../gpu/readback.ts';
import { averageMetrics, broadcastOptimizerState, broadcastParameters } from './broadcast-state.ts';
import { synchronizeReplicas, type LocalSgdOptimizer } from './diloco.ts';
import type { ElasticRing } from './elastic-ring.ts';
import { learningRateAt } from './lr.ts';
import type { DistributedOptimizer } from './optimizer.ts';
import { endsRun, lostRanksOf } from './ring-errors.ts';
import { ShareBalancer } from './shares.ts';
import { RoundCounter } from './timeline.ts';
import { guardOf } from './train-config.ts';
import { TrainingState } from './training-state.ts';
import { restore } from './model-fit.ts';
import type { DistributedTrainArgs, DistributedTrainConfig, DistributedTrainResult } from './trainer-types.ts';

/** When this rank's step began, and how long its own compute took (what balancing by speed divides by). */
export class StepClock {
  start = 0;
  computeMs = 0;
}

/** What the loop trains with; trainer.ts builds them and destroys them after. */
export interface TrainingParts {
  ring: ElasticRing;
  bus: EventBus;
  model: Model;
  ringOpt: DistributedOptimizer | LocalSgdOptimizer;
  /** The steps' losses, read with each step's gradients. */
  losses: DeferredScalars;
  clock: StepClock;
}

type RankBatch = ReturnType<typeof rankBatch>;

export class RingTraining {
  private readonly config: DistributedTrainConfig;
  private readonly state = new TrainingState();
  private readonly rounds = new RoundCounter();
  private readonly countedBuses = new Set<EventBus>();
  private readonly balancer: ShareBalancer;
  private readonly orders = new EpochOrders();
  // What depends on the ring: rebuilt whenever the ring re-forms.
  private globalBatch = 0;
  private stepsPerEpoch = 0;
  private shard!: Dataset;
  /**
   * The last state known to be sound: evaluated with a finite loss, every weight finite. A run that
   * diverges offers this one, not its last step: the steps before a loss or a gradient turned
   * non-finite already moved the weights far off (1e17 was seen), finite or not.
   */
  private lastSound: TrainingCheckpoint | undefined;

  constructor(
    private readonly args: DistributedTrainArgs,
    private readonly parts: TrainingParts,
  ) {
    this.config = args.config;
    this.balancer = new ShareBalancer(this.config.balance ?? 'equal');
    this.countRoundsOn(parts.ring.comm);
    parts.ring.onReformed(async () => {
      parts.ringOpt.ringReformed();
      parts.ringOpt.resetAccumulation();
      await this.syncFromRoot();
    });
  }

  private get comm(): Communicator {
    return this.parts.ring.comm;
  }

  /** Trains to the end, or until an error ends the run: then the result says why, after the recovery hand-out. */
  async run(): Promise<DistributedTrainResult> {
    try {
      await this.start();
      await this.loop();
      // Stopped mid-epoch (or before any evaluation): evaluate and save where training stopped.
      if (Number.isNaN(this.state.evaluation.accuracy) || this.state.lossCount > 0) {
        while (!(await this.parts.ring.guarded(() => this.evaluate()))) {
          // the ring re-formed during the evaluation: evaluate again on the new one
        }
        await this.handOut(this.comm.rank === 0);
      }
      return this.result();
    } catch (err) {
      // Whatever ended the run, the weights are those of the last step this rank completed.
      const why = isRingtrainError(err) ? err : new RingtrainError(ErrorCode.Aborted, `training failed: ${String(err)}`, undefined, { cause: err });
      // Tell the other ranks now (a diverged loss, a bug) rather than let them wait for our data until they time out.
      if (!this.comm.error) this.comm.abort(why);
      const noRecovery = await this.recover(why).catch((e: unknown) => `saving it failed: ${e instanceof Error ? e.message : String(e)}`);
      if (!endsRun(err)) throw err;
      return { ...this.result(err), noRecovery };
    }
  }

  /** Replicas start identical: the root's position (a resumed one), weights and optimizer state everywhere. */
  private async start(): Promise<void> {
    const { resume } = this.args;
    if (resume && this.comm.rank === 0) {
      await restore(this.parts.model, this.parts.ringOpt.optimizer, resume, this.config, this.args.resumeName ?? 'checkpoint', this.args.train);
      this.state.resumeFrom(resume);
    }
    await this.syncFromRoot();
  }

  /** Steps, and an evaluation at each epoch's end, until the step or epoch limit or shouldStop; a step the ring broke under is taken again on the re-formed ring. */
  private async loop(): Promise<void> {
    const { config, state } = this;
    const stepLimit = config.steps ?? Infinity;
    const epochLimit = config.steps === undefined ? config.epochs : Infinity;
    while (state.step < stepLimit && state.epoch < epochLimit && !this.args.shouldStop?.()) {
      if (this.epochEnded()) {
        if (!(await this.parts.ring.guarded(() => this.evaluate()))) continue;
        state.nextEpoch();
        await this.handOut(this.comm.rank === 0);
        continue;
      }
      // The ranks' batches at this step together are the one global batch at this position.
      const position = { global: this.globalBatch, epochExamples: state.epochExamples };
      const b = rankBatch(this.args.train, { ...position, shares: this.balancer.shares, rank: this.comm.rank, seed: config.seed, epoch: state.epoch, replacement: config.sampling === 'replacement' }, this.orders);
      if (!(await this.parts.ring.guarded(() => this.step(b)))) continue;
      if (state.step >= stepLimit || this.args.shouldStop?.()) break;
      await this.parts.ring.membershipChanged();
    }
  }

  /** Whether this epoch's examples are taken (drawn with replacement: as many steps as full global batches fit). */
  private epochEnded(): boolean {
    const { epochExamples } = this.state;
    if (this.config.sampling === 'replacement') return Math.floor(epochExamples / this.globalBatch) >= this.stepsPerEpoch;
    return epochDone(this.args.train.count, { global: this.globalBatch, epochExamples });
  }

  /** What depends on the ring's size: the global batch, the steps of an epoch, the shares, this rank's test shard. */
  private fitRing(): void {
    const { config, comm } = this;
    const { train, test } = this.args;
    this.globalBatch = config.globalBatch ?? comm.size * config.batch;
    checkShares(this.globalBatch, comm.size);
    this.stepsPerEpoch = stepsPerEpochAt(train.count, this.globalBatch);
    if (this.stepsPerEpoch === 0) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `a global batch of ${this.globalBatch} is larger than the ${train.count} training examples; use a smaller batch.`, { globalBatch: this.globalBatch, examples: train.count });
    }
    this.balancer.reset(this.globalBatch, comm.size);
    this.shard = testShard(test, comm.rank, comm.size);
  }

  /** Every rank takes the root's position, weights and optimizer state (start, resume, and after the ring re-forms). */
  private async syncFromRoot(): Promise<void> {
    const { comm, state } = this;
    const timeoutMs = this.config.timeoutMs;
    const position = await broadcast(comm, comm.rank === 0 ? state.position() : new Int32Array(3), { root: 0, name: 'training-position', timeoutMs });
    await broadcastParameters(comm, this.parts.model, { timeoutMs });
    await broadcastOptimizerState(comm, this.parts.ringOpt.optimizer, { timeoutMs });
    // Only now: a sync cut short leaves this rank's position with its own weights.
    state.takePosition(position);
    this.fitRing();
  }

  /** One step on this rank's part of the batch: compute, the ring's step, then the meters and the events. */
  private async step(b: RankBatch): Promise<void> {
    const { config, state, comm } = this;
    const { model, ringOpt, losses, clock, bus } = this.parts;
    const { rank, size } = comm;
    const t0 = (clock.start = now());
    bus.emit({ type: 'compute-begin', t: t0, rank, step: state.step });
    model.forwardBackwardDeferred(b.x, b.labels, undefined, losses);
    bus.emit({ type: 'compute-end', t: now(), rank, step: state.step });
    const totalSteps = config.steps ?? config.epochs * this.stepsPerEpoch;
    const lr = learningRateAt({ baseLr: config.lr, size, warmupSteps: config.warmupSteps, warmupFrom: config.warmupFrom, scaleBySize: config.scaleLr ?? false, decay: config.lrSchedule, totalSteps }, state.step);
    // Weighed by this rank's share of the step's counted targets (exactly 1 when shares are equal).
    const mine = countedTargets(b.labels);
    const weight = b.ringTargets > 0 ? (size * mine) / b.ringTargets : (size * b.size) / this.globalBatch;
    const r = await ringOpt.step(lr, weight, state.step).catch((err: unknown) => {
      const guard = guardOf(config);
      throw guard !== false ? suspectPeersFirst(err, config.verify === true, guard.doubt !== false) : err;
    });
    // A pass summed locally (backwardPassesPerStep > 1) reduced nothing: all of it was compute.
    if (!r.applied) clock.computeMs = now() - t0;
    // ringOpt.step's gradient read carried the loss, so this does not wait; the last value is this step's (a failed try may have left one).
    const loss = (await losses.collect()).at(-1) ?? NaN;
    if (!Number.isFinite(loss)) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank}: the training loss became ${loss} at step ${state.step}: the run diverged; lower --lr (now ${config.lr}).`, { step: state.step, rank, diverged: true });
    }
    state.advance(this.globalBatch);
    this.balancer.observe(b.size, clock.computeMs);
    // The next step's shares (speed: one tiny allgather; counted in the step's time, it is part of its cost).
    await this.balancer.rebalance(comm, config.timeoutMs);
    const t1 = now();
    state.measure({ loss, ringExamples: this.globalBatch, examples: b.size, targets: mine, bytesSent: r.bytesSent, ms: t1 - t0 });
    this.reportStep(t1, b.size, loss);
  }

  /** After a step: the round count closes, and the step goes out as an event and to onStep. */
  private reportStep(t: number, samples: number, loss: number): void {
    const { comm, state } = this;
    const { step, epoch } = state;
    const samplesPerS = (state.ringSamples / state.trainMs) * 1000;
    this.countRoundsOn(comm);
    this.rounds.step();
    this.parts.bus.emit({ type: 'train-step', t, rank: comm.rank, size: comm.size, step, epoch, loss, samples, samplesPerS, bytesSent: comm.stats.bytesSent });
    this.args.onStep?.({ step, epoch, loss, samplesPerS, bytesSent: comm.stats.bytesSent, samples });
  }

  /** Collectives emit on their communicator's bus, which a re-formed ring replaces: the counter follows. */
  private countRoundsOn(comm: Communicator): void {
    if (this.countedBuses.has(comm.events)) return;
    this.countedBuses.add(comm.events);
    comm.events.on((e) => void (e.rank === this.comm.rank && this.rounds.record(e)));
  }

  private async evaluate(): Promise<void> {
    const { state, shard } = this;
    // Local SGD: replicas differ mid-round; end the round so every rank evaluates (and saves) the same weights.
    state.allreduceBytes += (await synchronizeReplicas(this.parts.ringOpt)).bytesSent;
    const local = await this.parts.model.evaluate(shard.inputs, shard.labels);
    // Weighed by counted targets (examples for a classifier, characters for the words): the ring's mean is the whole set's.
    const avg = await averageMetrics(this.comm, { accuracy: local.accuracy, loss: local.loss }, countedTargets(shard.labels), this.config.timeoutMs);
    state.evaluation = { accuracy: avg.accuracy, loss: avg.loss };
    const e = { step: state.step, epoch: state.epoch, testAccuracy: avg.accuracy, testLoss: avg.loss };
    this.parts.bus.emit({ type: 'evaluate', t: now(), rank: this.comm.rank, ...e });
    this.args.onEvaluate?.(e);
  }

  private checkpointOf(params: Float32Array): Promise<TrainingCheckpoint> {
    const { model, ringOpt } = this.parts;
    return this.state.checkpoint({ config: this.config, model, optimizer: ringOpt.optimizer, params, globalBatch: this.globalBatch, ringSize: this.comm.size, vocabulary: this.args.train.vocabulary });
  }

  /** After an evaluation: the saving rank checkpoints, every rank shares its weights and keeps them as sound; one read-back serves all. */
  private async handOut(saves: boolean): Promise<void> {
    const { onCheckpoint, onWeights, onRecovery } = this.args;
    const checkpoint = saves ? onCheckpoint : undefined;
    if (!checkpoint && !onWeights && !onRecovery) return;
    const { step, epoch, evaluation } = this.state;
    const params = await this.parts.model.readParams();
    const state = checkpoint || onRecovery ? await this.checkpointOf(params) : undefined;
    if (onRecovery && Number.isFinite(evaluation.loss) && params.every(Number.isFinite)) this.lastSound = state;
    if (checkpoint) await checkpoint(state!);
    // checkpointFromFlat copied what it keeps, so the hook may have this array.
    await onWeights?.({ step, epoch, params });
  }

  /** The run ends with `err`: hand the last completed step to onRecovery (and onWeights), or say why not. */
  private async recover(err: RingtrainError): Promise<string | undefined> {
    const { step, epoch, completedSteps } = this.state;
    if (completedSteps === 0) return `rank ${this.comm.rank} completed no step in this run, so it holds only the weights it started from`;
    const params = await this.parts.model.readParams();
    // A diverged run (this rank's loss or gradient, or a peer's abort saying so): back to the last sound state.
    if (err.detail?.diverged === true || !params.every(Number.isFinite)) {
      if (!this.lastSound) return `the run diverged at step ${step} before any step this run evaluated, so no weights of it are worth resuming; start again with a lower --lr`;
      await this.args.onRecovery?.(this.lastSound, err);
      return undefined;
    }
    await this.args.onRecovery?.(await this.checkpointOf(params), err);
    await this.args.onWeights?.({ step, epoch, params });
    return undefined;
  }

  private result(stoppedBy?: RingtrainError): DistributedTrainResult {
    const { comm, state } = this;
    return {
      rank: comm.rank,
      size: comm.size,
      steps: state.step,
      epochs: state.epoch,
      testAccuracy: state.evaluation.accuracy,
      testLoss: state.evaluation.loss,
      trainLoss: state.trainLoss,
      samplesPerS: state.samplesPerS,
      tokensPerS: state.tokensPerS,
      allreduceBytes: state.allreduceBytes,
      rounds: this.rounds.perStep(),
      trainSeconds: state.trainMs / 1000,
      runtime: detectRuntime(),
      adapter: this.args.gpu.info.description,
      stoppedBy,
      lostRanks: stoppedBy ? lostRanksOf(stoppedBy) : [],
      completedSteps: state.completedSteps,
    };
  }
}

/**
 * A non-finite average after every rank's published norm passed the norm rule (finite, within
 * its ratio): either the sum overflowed, or a peer sent other numbers than it published. Say so
 * instead of blaming the learning rate alone; with verify on, such a peer is named before this.
 */
function suspectPeersFirst(err: unknown, verify: boolean, doubt: boolean): unknown {
  if (!isRingtrainError(err) || err.detail?.diverged !== true || err.detail?.tensor === undefined) return err;
  const head = err.message.replace(/: a rank diverged; lower the learning rate$/, '');
  // A peer that sends its gradient flipped and ×20, and publishes it so, passes both the norm rule
  // and verify, and diverges a job in a few steps: only the doubt rule leaves it out and names it.
  const flip = doubt ? '' : "; a peer may also have sent large gradients against the others', which the doubt rule (--doubt-rule) leaves out and names";
  const hint = verify
    ? `every rank published a finite gradient and the verified allreduce found no one changing it${flip}; if none did, the sum itself overflowed: lower the learning rate`
    : `every rank published a finite gradient before the sum, so a peer may have sent other numbers than it published: run the job with verify (--verify) to name it${flip}; if none did, the sum overflowed: lower the learning rate`;
  return new RingtrainError(err.code, `${head}: ${hint}`, err.detail);
}
