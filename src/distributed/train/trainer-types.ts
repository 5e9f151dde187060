/**
 * What trainDistributed (trainer.ts) takes and gives back: the job's training
 * settings, the caller's hooks, membership for elastic training, the result.
 */
import type { EventBus } from '../../core/events.ts';
import type { RingtrainError } from '../../core/errors.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import type { Dataset } from '../../data/dataset.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import type { Model } from '../../engine/model.ts';
import type { LocalSgdConfig, LocalTrainConfig } from './config-types.ts';
import type { GradientReducerOptions } from '../reduce/settings.ts';
import type { StepCheckOptions } from '../robust/step-checks.ts';
import type { Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import type { Rounds } from '../observe/timeline.ts';
import type { BalanceMode } from './shares.ts';
import type { PreparedTraining } from './warm-up.ts';
import type { MisbehaviourSink } from '../../comm/misbehaviour.ts';
import type { RingEpoch } from '../session/ring-epoch.ts';

/** With `syncEvery` (LocalSgdConfig) the ring trains by local SGD / DiLoCo (diloco.ts). */
export interface DistributedTrainConfig extends LocalTrainConfig, LocalSgdConfig {
  /** Scale the learning rate by the ring size (with warm-up). Default false. */
  scaleLr?: boolean;
  /**
   * Ranks may train at precisions of their own (`precision`: f32 beside f16-mixed); a step any rank overflowed
   * is skipped by all. Job-wide. Default false: ranks whose precisions differ are refused before the first step.
   */
  mixPrecisions?: boolean;
  /** 'cosine' anneals the learning rate to zero by the last step. Default 'constant'. */
  lrSchedule?: 'constant' | 'cosine';
  warmupSteps?: number;
  /** Where the warm-up starts: 'base' (the unscaled rate, with scaleLr) or 'zero' (the transformer recipe). */
  warmupFrom?: 'base' | 'zero';
  compression?: GradientReducerOptions['compression'];
  backwardPassesPerStep?: number;
  fusionThresholdBytes?: number;
  /** Reduce each gradient bucket as soon as backward finishes it, where the job allows (overlap.ts). Default true; job-wide. */
  overlap?: boolean;
  /** A rank silent this long fails the step (ms). */
  timeoutMs?: number;
  /**
   * Peers may join and leave mid-run: the ring re-forms between steps. A job-wide
   * setting (elastic peers run one extra tiny collective per step to agree on membership).
   */
  elastic?: boolean;
  /**
   * The contribution guard (guard.ts): every step, before summing, each rank's gradient norm
   * is checked against the others'; an offender is named and the step dropped. The norm rules are
   * on by default, the doubt and direction rules when asked for (`{ doubt: {}, direction: {} }`, as
   * a job's `doubtRule`/`directionRules` do); false turns every rule off (one tiny allgather per step less).
   */
  guard?: StepCheckOptions['guard'];
  /** The verified allreduce (step-checks.ts): every gradient sum is checked against the ranks' published sketches. Lossless compression only. */
  verify?: boolean;
  /**
   * Steps between the ranks' checks that they hold the same weights and optimizer state
   * (state-agreement.ts), which also run at the end of training. Default 100; 0 turns them off.
   * Local SGD runs none: its replicas differ between rounds by design.
   */
  stateCheckEvery?: number;
  /** 'mean' (default: the ring allreduce), or a coordinate-wise robust rule (robust-aggregate.ts). */
  aggregation?: Aggregation;
  /**
   * Examples per step for the whole ring, fixed whatever its size (global-batch.ts): each rank
   * takes a share of it and the gradients are weighed by the shares. Absent: `batch` per rank,
   * so the ring's batch is size × batch and moves with the ring's size.
   */
  globalBatch?: number;
  /** How the global batch is shared: 'equal' (default), or 'speed' (shares.ts; needs globalBatch). */
  balance?: BalanceMode;
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
  /**
   * The first weights (`--init-from`): the model's flat parameters, in place of its random init;
   * throws when they do not fit it. Only the root calls it, when it resumes nothing: the job's
   * start gives its weights to every rank.
   */
  initialParams?: (model: Model) => Float32Array;
  /** Called on rank 0 after each epoch and at the end. */
  onCheckpoint?: (c: TrainingCheckpoint) => void | Promise<void>;
  /**
   * Called on every rank whose run ends with an error, with the state of the last step it
   * completed, only if it completed one. A run that diverged (`why.detail.diverged`) or whose
   * weights are not finite hands over its last evaluated state instead, if that was sound
   * (finite weights and loss), else nothing. Replicas agree, so ranks that stopped at the same
   * step hand over the same weights.
   */
  onRecovery?: (c: TrainingCheckpoint, why: RingtrainError) => void | Promise<void>;
  /**
   * Called on EVERY rank after each epoch's evaluation and at the end (also when
   * the ring breaks) with a copy of this rank's weights, which equal every other
   * rank's: a browser tab shows predictions with it, whatever its rank.
   */
  onWeights?: (w: { step: number; epoch: number; params: Float32Array }) => void | Promise<void>;
  /** Called after every step (progress reports to the server, say). */
  /** `samples`: this rank's share of the step's global batch. */
  onStep?: (s: {
    step: number;
    epoch: number;
    loss: number;
    samplesPerS: number;
    bytesSent: number;
    samples: number;
  }) => void;
  /** Called after each evaluation with the metrics averaged over ranks. */
  onEvaluate?: (e: { step: number; epoch: number; testAccuracy: number; testLoss: number }) => void;
  /** Polled between steps; returning true stops training cleanly after the current step. */
  shouldStop?: () => boolean;
  /** Elastic training: peers may join and leave; the ring re-forms between steps instead of stopping. */
  elastic?: ElasticHooks;
  /** Told of every rank the step checks name (a Session's `misbehaviour` reports it to the server). */
  misbehaviour?: MisbehaviourSink;
  /**
   * Sees (and may change in place) this rank's gradients as read back from the
   * model, before the step checks and the sum: for code that embeds the trainer
   * (instrumentation, simulated devices). `computeMs`: this step's compute so far.
   */
  transformGradients?: (grads: Float32Array, step: number, computeMs: number) => void | Promise<void>;
  /**
   * Sees (and may change in place) this rank's contribution after the step
   * checks published its norm and sketches, just before it is summed.
   */
  transformContribution?: (grads: Float32Array, step: number) => void;
  /**
   * The model and optimizer to train, made for this config on this Gpu ahead of the ring
   * (warm-up.ts: their kernels compiled); the trainer takes them over and destroys them at its end.
   * Absent: the trainer makes them.
   */
  prepared?: PreparedTraining;
}

/**
 * What the trainer needs from membership to train elastically (a Session
 * provides it). Epochs here are membership epochs of the signaling server, by server connection (ring-epoch.ts).
 */
export interface ElasticHooks {
  /** The membership epoch the current communicator was built for. */
  currentEpoch(): RingEpoch;
  /** The newest membership epoch this peer has heard of. */
  latestEpoch(): RingEpoch;
  /** Closes the current ring and builds one for the newest ready membership at `minEpoch` or later. */
  regroup(minEpoch: RingEpoch): Promise<Communicator>;
}

export interface DistributedTrainResult {
  rank: number;
  size: number;
  steps: number;
  epochs: number;
  testAccuracy: number;
  testLoss: number;
  trainLoss: number;
  /** Examples per second over the whole ring (the global batch per step over this rank's step time). */
  samplesPerS: number;
  /** Counted targets (characters for the words, examples for a classifier) per second over the whole ring (estimated: this rank's per example × the ring's examples). */
  tokensPerS: number;
  /** The model's parameters (a tied weight counted once). */
  params: number;
  /**
   * Collectives and negotiations per step on this rank, over every step but the first (null
   * with fewer than two steps). A steady-state step negotiates nothing: its collectives go
   * ahead on the response cache.
   */
  rounds: Rounds | null;
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
  /** Set when the last evaluation failed (the metrics are NaN then; the run and its checkpoint stand). */
  evaluationFailure?: RingtrainError;
  /**
   * SHA-256 (hex) of this rank's weights and optimizer state at the end: the digest the ring agreed
   * on at its final state check, or, where none ran (checks off, local SGD, a run stopped by an
   * error), this rank's own.
   */
  weightsHash?: string;
  /** --precision f16-mixed: steps whose update was skipped for an overflow on any rank, and this rank's loss scale at the end (absent in f32). */
  mixedPrecision?: { skippedSteps: number; lossScale: number };
}
