/**
 * A job's config (what the signaling server hands every peer in `welcome`)
 * is the one source of truth for how the job trains: a worker or a browser
 * tab joins and trains with exactly these settings, so every rank agrees.
 */
import type { Compression } from '../collectives/types.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { parseAggregation } from '../job/setting-text.ts';
import { isModelFile, registeredModel } from '../engine/define.ts';
import type { JobConfig } from '../signaling/protocol.ts';
import { JOB_SETTING_DEFAULTS as D, parseJobSettings, stepCheckOn } from '../job/settings.ts';
import { madeFromSchema } from './train-config.ts';
import type { DistributedTrainConfig } from './trainer.ts';

const MODELS = ['mlp', 'cnn', 'transformer'] as const;
const OPTIMIZERS = ['sgd', 'adamw'] as const;

/**
 * The training settings a job's config describes. Each setting's type, range and
 * the pairs that do not combine are settings.ts's; what is left here is what only
 * a training peer knows (its models and optimizers) and how the settings map
 * onto the trainer's config, which the trainer then takes as checked.
 */
export function trainConfigFromJob(job: JobConfig): DistributedTrainConfig {
  const model = job.model;
  const optimizer = job.optimizer as (typeof OPTIMIZERS)[number];
  if (!(MODELS as readonly string[]).includes(model) && !isModelFile(model))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the job trains model '${job.model}', which this peer does not know (${MODELS.join(', ')}); update ringtrain`,
    );
  if (!OPTIMIZERS.includes(optimizer))
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `the job uses optimizer '${job.optimizer}', which this peer does not know (${OPTIMIZERS.join(', ')}); update ringtrain`,
    );
  const h = parseJobSettings(job.hyperparameters);
  // A model file (path in job.model) trains under the name it was registered as when this peer loaded it
  // (src/cli/model-option.ts).
  const fileModel =
    isModelFile(model) && h.modelName !== undefined && registeredModel(h.modelName) ? h.modelName : undefined;
  if (h.lr === undefined)
    throw new RingtrainError(ErrorCode.InvalidArgument, "the job's config has no learning rate (hyperparameters.lr)");
  return madeFromSchema({
    model: fileModel ?? model,
    optimizer,
    batch: job.batchPerPeer,
    lr: h.lr,
    momentum: h.momentum ?? D.momentum,
    weightDecay: h.weightDecay ?? D.weightDecay,
    seed: h.seed ?? D.seed,
    epochs: h.epochs ?? D.epochs,
    steps: h.steps,
    compression: (h.compression ?? D.compression) as Compression,
    backwardPassesPerStep: h.backwardPassesPerStep ?? D.backwardPassesPerStep,
    scaleLr: h.scaleLr ?? D.scaleLr,
    lrSchedule: h.lrSchedule ?? D.lrSchedule,
    warmupSteps: h.warmupSteps ?? D.warmupSteps,
    warmupFrom: h.warmupFrom ?? D.warmupFrom,
    sampling: h.sampling ?? D.sampling,
    fusionThresholdBytes: h.fusionThresholdBytes,
    overlap: h.overlap ?? D.overlap,
    timeoutMs: h.timeoutMs,
    elastic: h.elastic ?? D.elastic,
    // A fixed global batch shared over the ring (absent: batchPerPeer per rank), by speed or equally.
    globalBatch: h.globalBatch,
    balance: h.balance ?? D.balance,
    // The verified allreduce (step-checks.ts): a job-wide setting, every rank publishes the same sketches;
    // on in elastic jobs unless they say verify: false (stepCheckOn says why).
    verify: stepCheckOn(h, 'verify'),
    // The direction rules (direction.ts) are asked for, not on by default: in CI an honest CNN rank
    // late in training (loss ~0.01, one hard example: 96x the median norm against the others)
    // tripped the pull rule and stopped a non-elastic job; the NaN/Inf and 1,000x norm rules stay on.
    // The doubt rule (doubt.ts): on in elastic jobs unless they say doubtRule: false (stepCheckOn says why).
    guard: {
      ...(h.directionRules === true ? {} : { direction: false }),
      ...(stepCheckOn(h, 'doubtRule') ? {} : { doubt: false }),
    },
    aggregation: h.aggregation === undefined ? undefined : parseAggregation(h.aggregation),
    // Local SGD / DiLoCo when the job sets syncEvery (checked again where the optimizer is made).
    syncEvery: h.syncEvery,
    outerLr: h.outerLr,
    outerMomentum: h.outerMomentum,
    // --model-options (and the transformer's --layers/--width/--heads) travel as one JSON object string (the schema
    // checked it is one).
    modelOptions: h.modelOptions === undefined ? undefined : (JSON.parse(h.modelOptions) as Record<string, unknown>),
  });
}
