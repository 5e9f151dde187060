/**
 * Data-parallel training on one rank of a ring: the loop every worker runs,
 * under Node, Deno or in a browser tab. Runtime-agnostic: the caller brings
 * the GPU, the communicator, the data, and where checkpoints go.
 *
 * Each step: forward/backward on this rank's share of the ring's global batch
 * (global-batch.ts), average the gradients over the ring weighed by the shares
 * (DistributedOptimizer), update. With plain SGD one step of N ranks is exactly
 * one step of one rank at the global batch. The global batch is the job's
 * `globalBatch`, fixed whatever the ring's size (an elastic ring that loses a
 * peer takes the same steps as before), or else `batch` per rank. Shares are
 * equal, or follow each rank's measured speed (`balance: 'speed'`, shares.ts).
 *
 * When a collective fails (a peer left, a rank stalled) the loop stops at
 * once: the failed step applied no update, so the weights are those of the
 * last completed step on every survivor. Any error that ends the run (a broken
 * ring, a lost server, a diverged loss) hands those weights to `onRecovery`,
 * unless this rank completed no step (then the weights are only where it
 * started, which the caller already has). A diverged run hands over its last
 * evaluated state instead (finite weights, finite loss), or nothing.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../core/errors.ts';
import { now, type EventBus } from '../core/events.ts';
import type { Communicator } from '../comm/interface.ts';
import { RoundCounter } from './timeline.ts';
import { detectRuntime } from '../core/runtime.ts';
import { checkpointFromFlat, type TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import { allreduce } from '../collectives/allreduce.ts';
import { broadcast } from '../collectives/broadcast.ts';
import { countedTargets, type Dataset } from '../data/dataset.ts';
import { checkShares, epochDone, EpochOrders, rankBatch, stepsPerEpoch as stepsPerEpochAt, testShard } from '../data/global-batch.ts';
import { createModel, createOptimizer } from '../engine/index.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { checkDataFits, modelSpecFor, restore } from './train-local.ts';
import { averageMetrics, broadcastOptimizerState, broadcastParameters } from './broadcast-state.ts';
import { learningRateAt } from './lr.ts';
import { ringOptimizer, synchronizeReplicas } from './diloco.ts';
import { StepChecks } from './step-checks.ts';
import { endsRun, isBroken, lostRanksOf } from './ring-errors.ts';
import { ShareBalancer } from './shares.ts';
import type { DistributedTrainArgs, DistributedTrainResult } from './trainer-types.ts';
import { configSettingName, refuseConflicts } from './setting-conflicts.ts';

export type { DistributedTrainArgs, DistributedTrainConfig, DistributedTrainResult, ElasticHooks } from './trainer-types.ts';

export async function trainDistributed(args: DistributedTrainArgs): Promise<DistributedTrainResult> {
  const { gpu, train, test, config } = args;
  const elastic = config.elastic ? args.elastic : undefined;
  if (config.elastic && !args.elastic) {
    throw new RingtrainError(ErrorCode.InvalidArgument, 'this job trains elastically, but no membership hooks were given; pass session.elastic as the elastic option');
  }
  if (config.balance === 'speed' && config.globalBatch === undefined) throw new RingtrainError(ErrorCode.InvalidArgument, 'balancing batch shares by speed needs a fixed global batch; give the job a globalBatch (--global-batch)');
  if (config.balance === 'speed' && config.syncEvery !== undefined) throw new RingtrainError(ErrorCode.InvalidArgument, 'balancing batch shares by speed is for synchronous training; drop --balance speed or --sync-every');
  let comm = args.comm;
  const bus = args.bus ?? comm.events;
  // Collectives emit on their communicator's bus, which a re-formed ring may replace: follow it.
  const rounds = new RoundCounter();
  const counted = new Set<EventBus>();
  const countOn = (c: Communicator): void => {
    if (counted.has(c.events)) return;
    counted.add(c.events);
    c.events.on((e) => void (e.rank === comm.rank && rounds.record(e)));
  };
  countOn(comm);
  const model = createModel(gpu, modelSpecFor(config, train));
  try {
    checkDataFits(model, train);
  } catch (err) {
    model.destroy();
    throw err;
  }
  const inner = createOptimizer(model, { kind: config.optimizer, lr: config.lr, momentum: config.momentum, weightDecay: config.weightDecay });
  // The step's loss rides along with the gradient read (one GPU→CPU wait per step, not two).
  const losses = new DeferredScalars(gpu, 4);
  // The norm rules by default; the doubt and direction rules only when asked for, as a job's config does
  // (the doubt rule's clip changes honest sums, so an unasked-for default would break data-parallel equivalence).
  const guard = config.guard ?? { direction: false, doubt: false };
  const settings = { ...config, doubtRule: guard !== false && guard.doubt !== false };
  refuseConflicts(settings, configSettingName(settings));
  const robust = config.aggregation && config.aggregation.rule !== 'mean' ? config.aggregation.rule : undefined;
  const checks = new StepChecks({ guard, verify: config.verify, leaveOut: robust === undefined, seed: config.seed, fusionThresholdBytes: config.fusionThresholdBytes, timeoutMs: config.timeoutMs });
  const dopt = ringOptimizer(comm, model, inner, {
    ...config,
    // The contribution guard and the verified allreduce (synchronous training: they check the gradients each rank is about to send, and their sum).
    beforeReduce: async (local) => {
      await args.transformGradients?.(local, step, now() - stepStart);
      // This rank's compute (a slowed rank's included), not the waiting for others: what balancing divides by.
      computeMs = now() - stepStart;
      const factor = await checks.before(comm, local, step);
      args.transformContribution?.(local, step);
      return factor;
    },
    afterReduce: (reduced, scale, prescale) => checks.after(comm, reduced, scale, prescale),
    observeReceived: config.verify ? (offset, values) => checks.observe(comm, offset, values) : undefined,
  });
  // Local SGD's optimizer state includes the outer state: broadcasts and checkpoints carry it.
  const optimizer = dopt.optimizer;

  // Where training stands. `epochExamples` counts examples the whole ring has taken this epoch,
  // so the position survives a change of ring size (elastic) as well as a resume.
  let step = 0;
  let epoch = 0;
  let epochExamples = 0;
  // What depends on the ring: rebuilt whenever the ring re-forms.
  let globalBatch = 0;
  let stepsPerEpoch = 0;
  let shard!: Dataset;
  const balancer = new ShareBalancer(config.balance ?? 'equal');
  const orders = new EpochOrders();
  let stepStart = 0;
  let computeMs = 0;
  let trainMs = 0;
  let samples = 0;
  let ringSamples = 0;
  let tokens = 0;
  let allreduceBytes = 0;
  let lossSum = 0;
  let lossCount = 0;
  let evaluation = { accuracy: NaN, loss: NaN };
  let completedSteps = 0;
  const stepLimit = config.steps ?? Infinity;
  const replacement = config.sampling === 'replacement';

  const fitRing = (): void => {
    globalBatch = config.globalBatch ?? comm.size * config.batch;
    checkShares(globalBatch, comm.size);
    // An epoch is as many steps as full global batches fit (drawn with replacement, the words, only that count).
    stepsPerEpoch = stepsPerEpochAt(train.count, globalBatch);
    if (stepsPerEpoch === 0) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `a global batch of ${globalBatch} is larger than the ${train.count} training examples; use a smaller batch.`, { globalBatch, examples: train.count });
    }
    balancer.reset(globalBatch, comm.size);
    shard = testShard(test, comm.rank, comm.size);
  };

  /** Every rank takes the root's position, weights and optimizer state (start, resume, and after the ring re-forms). */
  const syncFromRoot = async (): Promise<void> => {
    const pos = await broadcast(comm, new Int32Array(comm.rank === 0 ? [step, epoch, epochExamples] : [0, 0, 0]), { root: 0, name: 'training-position', timeoutMs: config.timeoutMs });
    await broadcastParameters(comm, model, { timeoutMs: config.timeoutMs });
    await broadcastOptimizerState(comm, optimizer, { timeoutMs: config.timeoutMs });
    // Only now: a sync cut short leaves this rank's position with its own weights.
    [step, epoch, epochExamples] = [pos[0], pos[1], pos[2]];
    fitRing();
  };

  const regroup = async (minEpoch: number): Promise<void> => {
    comm = await elastic!.regroup(minEpoch);
    dopt.setCommunicator(comm);
    dopt.resetAccumulation();
    await syncFromRoot();
  };

  /** Runs `fn`; when the ring breaks under elastic training, re-forms it and answers false instead of throwing. */
  const guarded = async (fn: () => Promise<void>): Promise<boolean> => {
    try {
      await fn();
      return true;
    } catch (err) {
      if (!elastic || !isBroken(err)) throw err;
      bus.emit({ type: 'peer-lost', t: now(), rank: comm.rank, peer: lostRanksOf(err)[0] ?? -1, reason: err.message });
      // The failed step applied no update; wait for the server's next membership and carry on without the lost peer.
      await regroup(elastic.currentEpoch() + 1);
      return false;
    }
  };

  const checkpointOf = async (params: Float32Array): Promise<TrainingCheckpoint> =>
    checkpointFromFlat({
      model: config.model,
      optimizer: config.optimizer,
      step,
      epoch,
      layout: model.layout,
      params,
      optimizerState: await optimizer.exportState(),
      extra: { seed: String(config.seed), batch: String(config.batch), global_batch: String(globalBatch), lr: String(config.lr), size: String(comm.size), epoch_examples: String(epochExamples), model_spec: JSON.stringify(model.spec), ...(train.vocabulary ? { vocabulary: train.vocabulary } : {}) },
    });

  /**
   * The last state known to be sound: evaluated with a finite loss, every weight finite. A run that
   * diverges offers this one, not its last step: the steps before a loss or a gradient turned
   * non-finite already moved the weights far off (1e17 was seen), finite or not.
   */
  let lastSound: TrainingCheckpoint | undefined;

  /** After an evaluation: the saving rank checkpoints, every rank shares its weights and keeps them as sound; one read-back serves all. */
  const handOut = async (saves: boolean): Promise<void> => {
    const checkpoint = saves ? args.onCheckpoint : undefined;
    if (!checkpoint && !args.onWeights && !args.onRecovery) return;
    const params = await model.readParams();
    const state = checkpoint || args.onRecovery ? await checkpointOf(params) : undefined;
    if (args.onRecovery && Number.isFinite(evaluation.loss) && params.every(Number.isFinite)) lastSound = state;
    if (checkpoint) await checkpoint(state!);
    // checkpointFromFlat copied what it keeps, so the hook may have this array.
    await args.onWeights?.({ step, epoch, params });
  };

  /** The run ends with `err`: hand the last completed step to onRecovery (and onWeights), or say why not. */
  const recover = async (err: RingtrainError): Promise<string | undefined> => {
    if (completedSteps === 0) return `rank ${comm.rank} completed no step in this run, so it holds only the weights it started from`;
    const params = await model.readParams();
    // A diverged run (this rank's loss or gradient, or a peer's abort saying so): back to the last sound state.
    if (err.detail?.diverged === true || !params.every(Number.isFinite)) {
      if (!lastSound) return `the run diverged at step ${step} before any step this run evaluated, so no weights of it are worth resuming; start again with a lower --lr`;
      await args.onRecovery?.(lastSound, err);
      return undefined;
    }
    await args.onRecovery?.(await checkpointOf(params), err);
    await args.onWeights?.({ step, epoch, params });
    return undefined;
  };
  const evaluate = async (): Promise<void> => {
    // Local SGD: replicas differ mid-round; end the round so every rank evaluates (and saves) the same weights.
    allreduceBytes += (await synchronizeReplicas(dopt)).bytesSent;
    const local = await model.evaluate(shard.inputs, shard.labels);
    // Weighed by counted targets (examples for a classifier, characters for the words): the ring's mean is the whole set's.
    const avg = await averageMetrics(comm, { accuracy: local.accuracy, loss: local.loss }, countedTargets(shard.labels), config.timeoutMs);
    evaluation = { accuracy: avg.accuracy, loss: avg.loss };
    bus.emit({ type: 'evaluate', t: now(), rank: comm.rank, step, epoch, testAccuracy: avg.accuracy, testLoss: avg.loss });
    args.onEvaluate?.({ step, epoch, testAccuracy: avg.accuracy, testLoss: avg.loss });
  };

  const result = (stoppedBy?: RingtrainError): DistributedTrainResult => ({
    rank: comm.rank,
    size: comm.size,
    steps: step,
    epochs: epoch,
    testAccuracy: evaluation.accuracy,
    testLoss: evaluation.loss,
    trainLoss: lossCount > 0 ? lossSum / lossCount : NaN,
    samplesPerS: trainMs > 0 ? (ringSamples / trainMs) * 1000 : 0,
    tokensPerS: trainMs > 0 && samples > 0 ? ((tokens / samples) * ringSamples * 1000) / trainMs : 0,
    allreduceBytes,
    rounds: rounds.perStep(),
    trainSeconds: trainMs / 1000,
    runtime: detectRuntime(),
    adapter: gpu.info.description,
    stoppedBy,
    lostRanks: stoppedBy ? lostRanksOf(stoppedBy) : [],
    completedSteps,
  });

  /** One step on this rank's part of the batch; false when the ring re-formed instead (elastic). */
  const trainStep = (b: ReturnType<typeof rankBatch>): Promise<boolean> =>
    guarded(async () => {
      const { rank, size } = comm;
      const t0 = (stepStart = now());
      bus.emit({ type: 'compute-begin', t: t0, rank, step });
      model.forwardBackwardDeferred(b.x, b.labels, undefined, losses);
      bus.emit({ type: 'compute-end', t: now(), rank, step });
      const totalSteps = config.steps ?? config.epochs * stepsPerEpoch;
      const lr = learningRateAt({ baseLr: config.lr, size, warmupSteps: config.warmupSteps, warmupFrom: config.warmupFrom, scaleBySize: config.scaleLr ?? false, decay: config.lrSchedule, totalSteps }, step);
      // Weighed by this rank's share of the step's counted targets (exactly 1 when shares are equal).
      const mine = countedTargets(b.labels);
      const r = await dopt.step(lr, b.ringTargets > 0 ? (size * mine) / b.ringTargets : (size * b.size) / globalBatch).catch((err: unknown) => {
        throw guard !== false ? suspectPeersFirst(err, config.verify === true, guard.doubt !== false) : err;
      });
      // A pass summed locally (backwardPassesPerStep > 1) reduced nothing: all of it was compute.
      if (!r.applied) computeMs = now() - t0;
      // dopt.step's gradient read carried the loss, so this does not wait; the last value is this step's (a failed try may have left one).
      const loss = (await losses.collect()).at(-1) ?? NaN;
      if (!Number.isFinite(loss)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank}: the training loss became ${loss} at step ${step}: the run diverged; lower --lr (now ${config.lr}).`, { step, rank, diverged: true });
      }
      step++;
      completedSteps++;
      epochExamples += globalBatch;
      balancer.observe(b.size, computeMs);
      // The next step's shares (speed: one tiny allgather; counted in the step's time, it is part of its cost).
      await balancer.rebalance(comm, config.timeoutMs);
      const t1 = now();
      trainMs += t1 - t0;
      samples += b.size;
      ringSamples += globalBatch;
      tokens += mine;
      allreduceBytes += r.bytesSent;
      lossSum += loss;
      lossCount++;
      const samplesPerS = (ringSamples / trainMs) * 1000;
      countOn(comm);
      rounds.step();
      bus.emit({ type: 'train-step', t: t1, rank, size, step, epoch, loss, samples: b.size, samplesPerS, bytesSent: comm.stats.bytesSent });
      args.onStep?.({ step, epoch, loss, samplesPerS, bytesSent: comm.stats.bytesSent, samples: b.size });
    });

  /** Elastic: after each step the ranks agree on the newest membership any of them has seen; a newer one re-forms the ring. */
  const membershipChanged = async (): Promise<boolean> => {
    if (!elastic) return false;
    let agreed = elastic.currentEpoch();
    const ok = await guarded(async () => {
      const r = await allreduce(comm, new Int32Array([elastic.latestEpoch()]), { op: 'max', name: 'membership-epoch', timeoutMs: config.timeoutMs });
      agreed = r[0];
    });
    if (!ok) return true;
    if (agreed <= elastic.currentEpoch()) return false;
    await regroup(agreed);
    return true;
  };

  try {
    try {
      if (args.resume && comm.rank === 0) {
        await restore(model, optimizer, args.resume, config, args.resumeName ?? 'checkpoint', train);
        step = args.resume.step;
        epoch = args.resume.epoch;
        const recorded = Number(args.resume.extra.epoch_examples);
        epochExamples = Number.isFinite(recorded) ? recorded : 0;
      }
      // Replicas start identical: the root's position, weights and optimizer state everywhere.
      await syncFromRoot();

      while (step < stepLimit && epoch < (config.steps === undefined ? config.epochs : Infinity) && !args.shouldStop?.()) {
        const position = { global: globalBatch, epochExamples };
        if (replacement ? Math.floor(epochExamples / globalBatch) >= stepsPerEpoch : epochDone(train.count, position)) {
          if (!(await guarded(evaluate))) continue;
          epoch++;
          epochExamples = 0;
          lossSum = 0;
          lossCount = 0;
          await handOut(comm.rank === 0);
          continue;
        }
        // The ranks' batches at this step together are the one global batch at this position.
        const b = rankBatch(train, { ...position, shares: balancer.shares, rank: comm.rank, seed: config.seed, epoch, replacement }, orders);
        if (!(await trainStep(b))) continue;
        if (step >= stepLimit || args.shouldStop?.()) break;
        await membershipChanged();
      }
      // Stopped mid-epoch (or before any evaluation): evaluate and save where training stopped.
      if (Number.isNaN(evaluation.accuracy) || lossCount > 0) {
        while (!(await guarded(evaluate))) {
          // the ring re-formed during the evaluation: evaluate again on the new one
        }
        await handOut(comm.rank === 0);
      }
      return result();
    } catch (err) {
      // Whatever ended the run, the weights are those of the last step this rank completed.
      const why = isRingtrainError(err) ? err : new RingtrainError(ErrorCode.Aborted, `training failed: ${String(err)}`, undefined, { cause: err });
      // Tell the other ranks now (a diverged loss, a bug) rather than let them wait for our data until they time out.
      if (!comm.error) comm.abort(why);
      const noRecovery = await recover(why).catch((e: unknown) => `saving it failed: ${e instanceof Error ? e.message : String(e)}`);
      if (!endsRun(err)) throw err;
      return { ...result(err), noRecovery };
    }
  } finally {
    losses.destroy();
    optimizer.destroy();
    model.destroy();
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
