/**
 * A job's config (what the signaling server hands every peer in `welcome`)
 * is the one source of truth for how the job trains: a worker or a browser
 * tab joins and trains with exactly these settings, so every rank agrees.
 */
import { topkRatio } from '../collectives/topk.ts';
import type { Compression } from '../collectives/types.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { isModelFile, registeredModel } from '../engine/define.ts';
import type { JobConfig } from '../signaling/protocol.ts';
import type { DistributedTrainConfig } from './trainer.ts';
import { parseAggregation } from '../collectives/robust-aggregate.ts';

const MODELS = ['mlp', 'cnn', 'transformer'] as const;
const OPTIMIZERS = ['sgd', 'adamw'] as const;

function num(h: JobConfig['hyperparameters'], key: string, fallback?: number): number | undefined {
  const v = h[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter '${key}' must be a number, got ${JSON.stringify(v)}; fix the job's config on the server`);
  }
  return v;
}

/** The training settings a job's config describes. */
export function trainConfigFromJob(job: JobConfig): DistributedTrainConfig {
  const model = job.model;
  const optimizer = job.optimizer as (typeof OPTIMIZERS)[number];
  if (!(MODELS as readonly string[]).includes(model) && !isModelFile(model)) throw new RingtrainError(ErrorCode.InvalidArgument, `the job trains model '${job.model}', which this peer does not know (${MODELS.join(', ')}); update ringtrain`);
  if (!OPTIMIZERS.includes(optimizer)) throw new RingtrainError(ErrorCode.InvalidArgument, `the job uses optimizer '${job.optimizer}', which this peer does not know (${OPTIMIZERS.join(', ')}); update ringtrain`);
  const h = job.hyperparameters;
  // A model file (path in job.model) trains under the name it was registered as when this peer loaded it (src/cli/model-option.ts).
  const fileModel = isModelFile(model) && typeof h.modelName === 'string' && registeredModel(h.modelName) ? h.modelName : undefined;
  const compression = h.compression ?? 'none';
  if (typeof compression !== 'string' || !(compression === 'none' || compression === 'fp16' || compression === 'int8' || topkRatio(compression) !== null)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'compression' must be 'none', 'fp16', 'int8' or 'topk:R' (0 < R <= 1), got ${JSON.stringify(compression)}`);
  }
  const lrSchedule = h.lrSchedule ?? 'constant';
  if (lrSchedule !== 'constant' && lrSchedule !== 'cosine') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'lrSchedule' must be 'constant' or 'cosine', got ${JSON.stringify(lrSchedule)}`);
  }
  const sampling = h.sampling ?? 'epochs';
  if (sampling !== 'epochs' && sampling !== 'replacement') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'sampling' must be 'epochs' or 'replacement', got ${JSON.stringify(sampling)}`);
  }
  const warmupFrom = h.warmupFrom ?? 'base';
  if (warmupFrom !== 'base' && warmupFrom !== 'zero') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'warmupFrom' must be 'base' or 'zero', got ${JSON.stringify(warmupFrom)}`);
  }
  const balance = h.balance ?? 'equal';
  if (balance !== 'equal' && balance !== 'speed') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'balance' must be 'equal' or 'speed', got ${JSON.stringify(balance)}`);
  }
  const globalBatch = num(h, 'globalBatch');
  if (globalBatch !== undefined && !(Number.isInteger(globalBatch) && globalBatch >= 1)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'globalBatch' must be a whole number >= 1 (examples per step for the whole ring), got ${globalBatch}`);
  }
  if (balance === 'speed' && (globalBatch === undefined || h.syncEvery !== undefined)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, "job hyperparameter 'balance: speed' shares a fixed global batch in synchronous training: give the job a 'globalBatch' and no 'syncEvery'");
  }
  // --model-options (and the transformer's --layers/--width/--heads) travel as one JSON object string.
  let modelOptions: Record<string, unknown> | undefined;
  if (h.modelOptions !== undefined) {
    let v: unknown;
    try {
      v = typeof h.modelOptions === 'string' ? JSON.parse(h.modelOptions) : undefined;
    } catch {
      v = undefined;
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `job hyperparameter 'modelOptions' must be a JSON object in a string, got ${JSON.stringify(h.modelOptions)}`);
    }
    modelOptions = v as Record<string, unknown>;
  }
  const lr = num(h, 'lr');
  if (lr === undefined) throw new RingtrainError(ErrorCode.InvalidArgument, "the job's config has no learning rate (hyperparameters.lr)");
  return {
    model: fileModel ?? model,
    optimizer,
    batch: job.batchPerPeer,
    lr,
    momentum: num(h, 'momentum', 0.9)!,
    weightDecay: num(h, 'weightDecay', 0)!,
    seed: num(h, 'seed', 1)!,
    epochs: num(h, 'epochs', 1)!,
    steps: num(h, 'steps'),
    compression: compression as Compression,
    backwardPassesPerStep: num(h, 'backwardPassesPerStep', 1),
    scaleLr: h.scaleLr === true,
    lrSchedule,
    warmupSteps: num(h, 'warmupSteps', 0),
    warmupFrom,
    sampling,
    fusionThresholdBytes: num(h, 'fusionThresholdBytes'),
    timeoutMs: num(h, 'timeoutMs'),
    elastic: h.elastic === true,
    // A fixed global batch shared over the ring (absent: batchPerPeer per rank), by speed or equally.
    globalBatch,
    balance,
    // The verified allreduce (step-checks.ts): a job-wide setting, every rank publishes the same sketches.
    verify: h.verify === true,
    // The direction rules (direction.ts) are asked for, not on by default: in CI an honest CNN rank
    // late in training (loss ~0.01, one hard example: 96x the median norm against the others)
    // tripped the pull rule and stopped a non-elastic job; the NaN/Inf and 1,000x norm rules stay on.
    // The doubt rule (doubt.ts) is asked for too (`doubtRule: true`) until it is measured over whole
    // honest CNN runs late in training, where honest hard examples are large and point against the
    // others (docs/ROBUSTNESS.md says what was and was not measured).
    guard: { ...(h.directionRules === true ? {} : { direction: false }), ...(h.doubtRule === true ? {} : { doubt: false }) },
    aggregation: typeof h.aggregation === 'string' ? parseAggregation(h.aggregation) : h.aggregation === undefined ? undefined : parseAggregation(String(h.aggregation)),
    // Local SGD / DiLoCo when the job sets syncEvery (checked again where the optimizer is made).
    syncEvery: num(h, 'syncEvery'),
    outerLr: num(h, 'outerLr'),
    outerMomentum: num(h, 'outerMomentum'),
    modelOptions,
  };
}
