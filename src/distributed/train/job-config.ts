/**
 * A job's config (what the signaling server hands every peer in `welcome`)
 * is the one source of truth for how the job trains: a worker or a browser
 * tab joins and trains with exactly these settings, so every rank agrees.
 */
import type { Compression } from '../../collectives/codecs/types.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { parseAggregation } from '../../job/setting-text.ts';
import { isModelFile, registeredModel } from '../../engine/define.ts';
import { optimizerNamed, optimizerNames } from '../../optimizers/index.ts';
import type { JobConfig } from '../../signaling/protocol.ts';
import { parseJobSettings, type JobSettings } from '../../job/settings.ts';
import type { DistributedTrainConfig } from './trainer.ts';

const MODELS = ['mlp', 'cnn', 'transformer'] as const;

/**
 * The trainer's config for a job: its model and optimizer (what only a training peer knows) and
 * its settings, parsed once (`settings`, parseJobSettings by default) with their defaults applied.
 * Each setting's type, range, default and the pairs that do not combine are src/job's.
 */
export function trainConfigFromJob(
  job: JobConfig,
  settings: JobSettings = parseJobSettings(job.hyperparameters),
): DistributedTrainConfig {
  const model = job.model;
  const optimizer = job.optimizer;
  if (!(MODELS as readonly string[]).includes(model) && !isModelFile(model))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the job trains model '${job.model}', which this peer does not know (${MODELS.join(', ')}); update ringtrain`,
    );
  if (!optimizerNamed(optimizer))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the job uses optimizer '${job.optimizer}', which this peer does not know (${optimizerNames().join(', ')}); update ringtrain`,
    );
  const { optimizer: o, schedule, data, reduce, checks, membership } = settings;
  const { modelName, modelOptions, precision, mixPrecisions } = settings.model;
  // A model file (path in job.model) trains under the name it was registered as when this peer loaded it
  // (src/cli/options/model-option.ts).
  const fileModel = isModelFile(model) && modelName !== undefined && registeredModel(modelName) ? modelName : undefined;
  if (o.lr === undefined)
    throw new RingtrainError(ErrorCode.InvalidArgument, "the job's config has no learning rate (hyperparameters.lr)");
  return {
    model: fileModel ?? model,
    optimizer,
    batch: job.batchPerPeer,
    lr: o.lr,
    momentum: o.momentum,
    weightDecay: o.weightDecay,
    seed: schedule.seed,
    epochs: schedule.epochs,
    steps: schedule.steps,
    compression: reduce.compression as Compression,
    backwardPassesPerStep: schedule.backwardPassesPerStep,
    microBatch: schedule.microBatch,
    // Every rank trains at the job's precision unless the job lets peers mix them (src/distributed/train/mixed-precision.ts).
    precision,
    mixPrecisions,
    scaleLr: o.scaleLr,
    lrSchedule: schedule.lrSchedule,
    warmupSteps: schedule.warmupSteps,
    warmupFrom: schedule.warmupFrom,
    sampling: data.sampling,
    fusionThresholdBytes: reduce.fusionThresholdBytes,
    overlap: reduce.overlap,
    timeoutMs: reduce.timeoutMs,
    elastic: membership.elastic,
    // A fixed global batch shared over the ring (absent: batchPerPeer per rank), by speed or equally.
    globalBatch: schedule.globalBatch,
    balance: schedule.balance,
    // The verified allreduce (step-checks.ts): a job-wide setting, every rank publishes the same sketches;
    // on in elastic jobs unless they say verify: false (src/job's stepCheckOn says why).
    verify: checks.verify,
    // The direction rules (direction.ts) are asked for, not on by default: in CI an honest CNN rank
    // late in training (loss ~0.01, one hard example: 96x the median norm against the others)
    // tripped the pull rule and stopped a non-elastic job; the NaN/Inf and 1,000x norm rules stay on.
    // The doubt rule (doubt.ts): on in elastic jobs unless they say doubtRule: false (stepCheckOn says why).
    guard: {
      ...(checks.directionRules ? {} : { direction: false }),
      ...(checks.doubtRule ? {} : { doubt: false }),
    },
    // The mean is the ring's plain sum: no aggregation object, as before defaults were applied here.
    aggregation: reduce.aggregation === 'mean' ? undefined : parseAggregation(reduce.aggregation),
    // Every rank checks that the ring holds one state every so many steps (state-agreement.ts).
    stateCheckEvery: checks.stateCheckEvery,
    // Local SGD / DiLoCo when the job sets syncEvery (checked again where the optimizer is made).
    syncEvery: reduce.syncEvery,
    outerLr: o.outerLr,
    outerMomentum: o.outerMomentum,
    // --model-options (and the transformer's --layers/--width/--heads) travel as one JSON object string (the schema
    // checked it is one).
    modelOptions: modelOptions === undefined ? undefined : (JSON.parse(modelOptions) as Record<string, unknown>),
  };
}
