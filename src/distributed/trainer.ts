/**
 * Data-parallel training on one rank of a ring: the loop every worker runs,
 * under Node, Deno or in a browser tab. Runtime-agnostic: the caller brings
 * the GPU, the communicator, the data, and where checkpoints go.
 *
 * Each step: forward/backward on this rank's shard of the batch, average the
 * gradients over the ring (DistributedOptimizer), update. Every rank sees
 * `batch` examples per step, so one step of N ranks covers N·batch examples:
 * with plain SGD that is exactly one step of one rank at batch N·batch.
 *
 * When a collective fails (a peer left, a rank stalled) the loop stops at
 * once: the failed step applied no update, so the weights are those of the
 * last completed step on every survivor. Any error that ends the run (a broken
 * ring, a lost server, a diverged loss) hands those weights to `onRecovery`,
 * unless this rank completed no step (then the weights are only where it
 * started, which the caller already has) or they are not finite.
 */
import { ErrorCode, isRingtrainError, RingtrainError } from '../core/errors.ts';
import { type EventBus, now } from '../core/events.ts';
import { detectRuntime } from '../core/runtime.ts';
import type { Communicator } from '../comm/communicator.ts';
import { checkpointFromFlat, type TrainingCheckpoint } from '../checkpoint/checkpoint.ts';
import { allreduce } from '../collectives/allreduce.ts';
import { broadcast } from '../collectives/broadcast.ts';
import { batchCount, batches } from '../data/batches.ts';
import { countedTargets, selectExamples, type Dataset } from '../data/dataset.ts';
import { DistributedSampler } from '../data/sampler.ts';
import { createModel, createOptimizer } from '../engine/index.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { DeferredScalars } from '../gpu/readback.ts';
import { modelSpecFor, restore, type LocalTrainConfig } from './train-local.ts';
import { averageMetrics, broadcastOptimizerState, broadcastParameters } from './broadcast-state.ts';
import { learningRateAt } from './lr.ts';
import { type DistributedOptimizerOptions } from './optimizer.ts';
import { ringOptimizer, synchronizeReplicas, type LocalSgdConfig } from './diloco.ts';
import { checkContributions, type GuardOptions } from './guard.ts';

/** With `syncEvery` (LocalSgdConfig) the ring trains by local SGD / DiLoCo (diloco.ts). */
export interface DistributedTrainConfig extends LocalTrainConfig, LocalSgdConfig {
  /** Scale the learning rate by the ring size (with warm-up). Default false. */
  scaleLr?: boolean;
  /** 'cosine' anneals the learning rate to zero by the last step. Default 'constant'. */
  lrSchedule?: 'constant' | 'cosine';
  warmupSteps?: number;
  /** Where the warm-up starts: 'base' (the unscaled rate, with scaleLr) or 'zero' (the transformer recipe). */
  warmupFrom?: 'base' | 'zero';
  compression?: DistributedOptimizerOptions['compression'];
  backwardPassesPerStep?: number;
  fusionThresholdBytes?: number;
  /** A rank silent this long fails the step (ms). */
  timeoutMs?: number;
  /**
   * Peers may join and leave mid-run: the ring re-forms between steps. A job-wide
   * setting (elastic peers run one extra tiny collective per step to agree on membership).
   */
  elastic?: boolean;
  /**
   * The contribution guard (guard.ts): every step, before summing, each rank's gradient norm
   * is checked against the others'; an offender is named and the step dropped. On by default;
   * false turns it off (one tiny allgather per step less).
   */
  guard?: GuardOptions | false;
}

export interface DistributedTrainArgs {
  gpu: Gpu;
  comm: Communicator;
  train: Dataset;
  test: Dataset;
  config: DistributedTrainConfig;
  /** Defaults to comm.events. */
  bus?: EventBus;
  /** Only the root's checkpoint counts: it is broadcast to every rank. */
  resume?: TrainingCheckpoint;
  resumeName?: string;
  /** Called on rank 0 after each epoch and at the end. */
  onCheckpoint?: (c: TrainingCheckpoint) => void | Promise<void>;
  /**
   * Called on every rank whose run ends with an error, with the state of the last step it
   * completed, only if it completed one and the weights are finite. Replicas agree, so ranks
   * that stopped at the same step hand over the same weights.
   */
  onRecovery?: (c: TrainingCheckpoint, why: RingtrainError) => void | Promise<void>;
  /**
   * Called on EVERY rank after each epoch's evaluation and at the end (also when
   * the ring breaks) with a copy of this rank's weights, which equal every other
   * rank's: a browser tab shows predictions with it, whatever its rank.
   */
  onWeights?: (w: { step: number; epoch: number; params: Float32Array }) => void | Promise<void>;
  /** Called after every step (progress reports to the server, say). */
  onStep?: (s: { step: number; epoch: number; loss: number; samplesPerS: number; bytesSent: number }) => void;
  /** Called after each evaluation with the metrics averaged over ranks. */
  onEvaluate?: (e: { step: number; epoch: number; testAccuracy: number; testLoss: number }) => void;
  /** Polled between steps; returning true stops training cleanly after the current step. */
  shouldStop?: () => boolean;
  /** Elastic training: peers may join and leave; the ring re-forms between steps instead of stopping. */
  elastic?: ElasticHooks;
  /** TESTS ONLY (worker --fault): changes this rank's gradients before they are checked and summed. */
  tamperGradients?: (grads: Float32Array, step: number) => void | Promise<void>;
}

/**
 * What the trainer needs from membership to train elastically (a Session
 * provides it). Epochs here are membership epochs of the signaling server.
 */
export interface ElasticHooks {
  /** The membership epoch the current communicator was built for. */
  currentEpoch(): number;
  /** The newest membership epoch this peer has heard of. */
  latestEpoch(): number;
  /** Closes the current ring and builds one for the newest ready membership with epoch >= minEpoch. */
  regroup(minEpoch: number): Promise<Communicator>;
}

export interface DistributedTrainResult {
  rank: number;
  size: number;
  steps: number;
  epochs: number;
  testAccuracy: number;
  testLoss: number;
  trainLoss: number;
  /** Examples per second over the whole ring (this rank's rate × size). */
  samplesPerS: number;
  /** Counted targets (characters for the words, examples for a classifier) per second over the whole ring. */
  tokensPerS: number;
  /** Payload bytes this rank sent for gradient allreduces. */
  allreduceBytes: number;
  trainSeconds: number;
  runtime: string;
  adapter: string;
  /** Set when the ring broke: the error every surviving rank got. */
  stoppedBy?: RingtrainError;
  /** Ranks that went away, when known. */
  lostRanks: number[];
  /** Steps this rank itself completed in this run (0: its weights are only where it started). */
  completedSteps: number;
  /** Set when the run ended with an error but no recovery state was handed over: why not. */
  noRecovery?: string;
}

/** The examples of `test` that this rank evaluates (strided, so shards differ by at most one). */
function testShard(test: Dataset, rank: number, size: number): Dataset {
  const idx: number[] = [];
  for (let i = rank; i < test.count; i += size) idx.push(i);
  return selectExamples(test, idx);
}

function lostRanksOf(err: RingtrainError): number[] {
  const d = err.detail ?? {};
  const out = new Set<number>();
  for (const v of [d.peer, d.lost, ...(Array.isArray(d.waitingFor) ? d.waitingFor : []), ...(Array.isArray(d.ranks) ? d.ranks : [])]) {
    if (typeof v === 'number' && Number.isInteger(v)) out.add(v);
  }
  return [...out].sort((a, b) => a - b);
}

export async function trainDistributed(args: DistributedTrainArgs): Promise<DistributedTrainResult> {
  const { gpu, train, test, config } = args;
  const elastic = config.elastic ? args.elastic : undefined;
  if (config.elastic && !args.elastic) {
    throw new RingtrainError(ErrorCode.InvalidArgument, 'this job trains elastically, but no membership hooks were given; pass session.elastic as the elastic option');
  }
  let comm = args.comm;
  const bus = args.bus ?? comm.events;
  const model = createModel(gpu, modelSpecFor(config, train));
  const inner = createOptimizer(model, { kind: config.optimizer, lr: config.lr, momentum: config.momentum, weightDecay: config.weightDecay });
  // The step's loss rides along with the gradient read (one GPU→CPU wait per step, not two).
  const losses = new DeferredScalars(gpu, 4);
  const dopt = ringOptimizer(comm, model, inner, {
    ...config,
    // The contribution guard (synchronous training: it checks the gradients each rank is about to send).
    beforeReduce: async (local) => {
      await args.tamperGradients?.(local, step);
      if (config.guard !== false) await checkContributions(comm, local, step, { timeoutMs: config.timeoutMs, ...config.guard });
    },
  });
  // Local SGD's optimizer state includes the outer state: broadcasts and checkpoints carry it.
  const optimizer = dopt.optimizer;

  // Where training stands. `epochExamples` counts examples the whole ring has taken this epoch,
  // so the position survives a change of ring size (elastic) as well as a resume.
  let step = 0;
  let epoch = 0;
  let epochExamples = 0;
  // What depends on the ring: rebuilt whenever the ring re-forms.
  let sampler!: DistributedSampler;
  let stepsPerEpoch = 0;
  let shard!: Dataset;
  let trainMs = 0;
  let samples = 0;
  let tokens = 0;
  let allreduceBytes = 0;
  let lossSum = 0;
  let lossCount = 0;
  let evaluation = { accuracy: NaN, loss: NaN };
  let completedSteps = 0;
  const stepLimit = config.steps ?? Infinity;
  const replacement = config.sampling === 'replacement';

  const fitRing = (): void => {
    sampler = new DistributedSampler(train.count, { rank: comm.rank, size: comm.size, seed: config.seed });
    // Drawn with replacement (the words), an epoch is only a count of steps: one peer's at the ring's batch.
    stepsPerEpoch = replacement ? batchCount(train.count, comm.size * config.batch) : Math.floor(sampler.shardLength / config.batch);
    if (stepsPerEpoch === 0) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `--batch ${config.batch} is larger than this rank's ${sampler.shardLength} training examples (${train.count} over ${comm.size} ranks); use a smaller batch.`);
    }
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
      extra: { seed: String(config.seed), batch: String(config.batch), lr: String(config.lr), size: String(comm.size), epoch_examples: String(epochExamples), model_spec: JSON.stringify(model.spec) },
    });

  /** After an evaluation: the saving rank checkpoints, every rank shares its weights; one read-back serves both. */
  const handOut = async (saves: boolean): Promise<void> => {
    const checkpoint = saves ? args.onCheckpoint : undefined;
    if (!checkpoint && !args.onWeights) return;
    const params = await model.readParams();
    if (checkpoint) await checkpoint(await checkpointOf(params));
    // checkpointFromFlat copied what it keeps, so the hook may have this array.
    await args.onWeights?.({ step, epoch, params });
  };

  /** The run ends with `err`: hand the last completed step to onRecovery (and onWeights), or say why not. */
  const recover = async (err: RingtrainError): Promise<string | undefined> => {
    if (completedSteps === 0) return `rank ${comm.rank} completed no step in this run, so it holds only the weights it started from`;
    const params = await model.readParams();
    if (!params.every(Number.isFinite)) return `the weights of step ${step} are not finite (the run diverged)`;
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
    samplesPerS: trainMs > 0 ? ((samples * comm.size) / trainMs) * 1000 : 0,
    tokensPerS: trainMs > 0 ? ((tokens * comm.size) / trainMs) * 1000 : 0,
    allreduceBytes,
    trainSeconds: trainMs / 1000,
    runtime: detectRuntime(),
    adapter: gpu.info.description,
    stoppedBy,
    lostRanks: stoppedBy ? lostRanksOf(stoppedBy) : [],
    completedSteps,
  });

  /** One step on this rank's part of the batch; false when the ring re-formed instead (elastic). */
  const trainStep = (b: { x: Float32Array; labels: Int32Array; size: number; targetShare?: number }): Promise<boolean> =>
    guarded(async () => {
      const { rank, size } = comm;
      const t0 = now();
      bus.emit({ type: 'compute-begin', t: t0, rank, step });
      model.forwardBackwardDeferred(b.x, b.labels, undefined, losses);
      bus.emit({ type: 'compute-end', t: now(), rank, step });
      const totalSteps = config.steps ?? config.epochs * stepsPerEpoch;
      const lr = learningRateAt({ baseLr: config.lr, size, warmupSteps: config.warmupSteps, warmupFrom: config.warmupFrom, scaleBySize: config.scaleLr ?? false, decay: config.lrSchedule, totalSteps }, step);
      const r = await dopt.step(lr, b.targetShare === undefined ? 1 : b.targetShare * size);
      // dopt.step's gradient read carried the loss, so this does not wait; the last value is this step's (a failed try may have left one).
      const loss = (await losses.collect()).at(-1) ?? NaN;
      if (!Number.isFinite(loss)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `rank ${rank}: the training loss became ${loss} at step ${step}: the run diverged; lower --lr (now ${config.lr}).`, { step, rank });
      }
      step++;
      completedSteps++;
      epochExamples += size * config.batch;
      const t1 = now();
      trainMs += t1 - t0;
      samples += b.size;
      tokens += countedTargets(b.labels);
      allreduceBytes += r.bytesSent;
      lossSum += loss;
      lossCount++;
      const samplesPerS = ((samples * size) / trainMs) * 1000;
      bus.emit({ type: 'train-step', t: t1, rank, size, step, epoch, loss, samples: b.size, samplesPerS, bytesSent: comm.stats.bytesSent });
      args.onStep?.({ step, epoch, loss, samplesPerS, bytesSent: comm.stats.bytesSent });
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
        await restore(model, optimizer, args.resume, config, args.resumeName ?? 'checkpoint');
        step = args.resume.step;
        epoch = args.resume.epoch;
        const recorded = Number(args.resume.extra.epoch_examples);
        epochExamples = Number.isFinite(recorded) ? recorded : 0;
      }
      // Replicas start identical: the root's position, weights and optimizer state everywhere.
      await syncFromRoot();

      training: while (step < stepLimit && epoch < (config.steps === undefined ? config.epochs : Infinity) && !args.shouldStop?.()) {
        const startBatch = Math.floor(epochExamples / (comm.size * config.batch));
        if (startBatch >= stepsPerEpoch) {
          if (!(await guarded(evaluate))) continue;
          epoch++;
          epochExamples = 0;
          lossSum = 0;
          lossCount = 0;
          await handOut(comm.rank === 0);
          continue;
        }
        // The sampler already shuffled by (seed, epoch): no second shuffle here, so the
        // ranks' batches at step t together are one big batch of the same examples.
        const order = replacement ? { replacement, seed: config.seed, epoch, share: { rank: comm.rank, size: comm.size } } : { indices: sampler.indices(epoch) };
        for (const b of batches(train, { batchSize: config.batch, startBatch, ...order })) {
          if (!(await trainStep(b))) continue training;
          if (step >= stepLimit || args.shouldStop?.()) break training;
          if (await membershipChanged()) continue training;
        }
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

/** The ring broke under this rank (elastic training re-forms it). */
function isBroken(err: unknown): err is RingtrainError {
  return isRingtrainError(err) && (err.code === ErrorCode.PeerLost || err.code === ErrorCode.Timeout || err.code === ErrorCode.Aborted || err.code === ErrorCode.Transport || err.code === ErrorCode.PeerMisbehaved);
}

/** Errors that stop training as a result (stoppedBy) rather than a throw: the ring or its server went away. */
function endsRun(err: unknown): err is RingtrainError {
  return isBroken(err) || isRingtrainError(err, ErrorCode.Signaling);
}
