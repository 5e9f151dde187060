/**
 * The model a run's config builds, and whether data and a checkpoint fit it:
 * every trainer (one peer or a ring), the resume check, the profiler and the
 * warm-up build and check models through these, so they refuse a wrong file
 * or table alike, naming what differs.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import {
  checkCheckpointKind,
  checkOptimizerState,
  flatParamsFor,
  type TrainingCheckpoint,
} from '../../checkpoint/checkpoint.ts';
import type { Dataset } from '../../data/dataset.ts';
import { describeRecord, recordName, type TokenizerName } from '../../data/tokenizer.ts';
import type { Model, ModelSpec, Optimizer } from '../../engine/index.ts';
import type { LocalTrainConfig } from './config-types.ts';

export function modelSpecFor(config: LocalTrainConfig, data: Dataset): ModelSpec {
  const spec = builtSpecFor(config, data);
  const allowed = BUILT_IN_OPTIONS[config.model];
  const unknown =
    allowed && config.modelOptions ? Object.keys(config.modelOptions).filter((k) => !allowed.includes(k)) : [];
  if (unknown.length > 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--model-options: the ${config.model} model takes ${allowed.join(', ')}, not ${unknown.join(', ')}`,
      { model: config.model, unknown },
    );
  }
  // Given options win over what the data suggests: a conflict then fails loudly when the model is built or trained.
  return (
    config.modelOptions ? { ...spec, ...config.modelOptions, kind: spec.kind, seed: spec.seed } : spec
  ) as ModelSpec;
}

/** What --model-options may set on a built-in model (the rest follows from the data). */
const BUILT_IN_OPTIONS: Record<string, string[]> = {
  mlp: ['hidden', 'activation'],
  cnn: ['channels', 'hidden'],
  transformer: ['layers', 'width', 'heads', 'positions', 'arch'],
};

/**
 * A model's options as a checkpoint records them (model_spec without kind and seed), keys sorted.
 * A transformer without `arch` is a classic one (every checkpoint from before GPT-2's architecture).
 */
function recordedOptions(spec: Record<string, unknown>): Record<string, unknown> {
  const { kind, seed: _seed, ...rest } = spec;
  const options = kind === 'transformer' ? { arch: 'classic', ...rest } : rest;
  return Object.fromEntries(Object.entries(options).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * A checkpoint belongs to a model by its layout (checked tensor by tensor) and
 * its options: the same layout with another activation is another model.
 * Checkpoints that record no model_spec are not checked here.
 */
export function checkModelOptions(c: TrainingCheckpoint, model: Pick<Model, 'spec'>, file: string): void {
  if (!c.extra.model_spec) return;
  let saved: Record<string, unknown>;
  try {
    saved = recordedOptions(JSON.parse(c.extra.model_spec) as Record<string, unknown>);
  } catch {
    return;
  }
  const ours = recordedOptions(model.spec);
  const keys = [...new Set([...Object.keys(saved), ...Object.keys(ours)])].filter(
    (k) => JSON.stringify(saved[k]) !== JSON.stringify(ours[k]),
  );
  if (keys.length === 0) return;
  const pass = Object.fromEntries(keys.filter((k) => k in saved).map((k) => [k, saved[k]]));
  throw new RingtrainError(
    ErrorCode.BadCheckpoint,
    `${file} was saved with model options ${JSON.stringify(Object.fromEntries(keys.map((k) => [k, saved[k] ?? null])))} but this run builds ${JSON.stringify(Object.fromEntries(keys.map((k) => [k, ours[k] ?? null])))}; ` +
      `pass --model-options '${JSON.stringify(pass)}' to resume it, or start without --resume.`,
    { file, saved, ours, differ: keys },
  );
}

function builtSpecFor(config: LocalTrainConfig, data: Dataset): ModelSpec {
  if (config.model === 'transformer') {
    // A sequence of token ids in, one next token out per position: the words data set's shape.
    if (data.positions !== data.inputSize || data.positions < 2) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the transformer reads token sequences with one target per position; this data has ${data.inputSize} inputs and ${data.positions} targets per example (use the words data set).`,
      );
    }
    // A text (it has a vocabulary) trains GPT-2's architecture; the words workload keeps the classic one its figures
    // were measured with.
    return {
      kind: 'transformer',
      seed: config.seed,
      context: data.inputSize,
      vocab: data.classes,
      arch: data.vocabulary !== undefined ? 'gpt2' : 'classic',
    };
  }
  if (config.model === 'cnn') {
    if (data.height !== 28 || data.width !== 28) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the CNN is built for 28×28 images, the data has ${data.height}×${data.width}; use --model mlp.`,
      );
    }
    return { kind: 'cnn', seed: config.seed, classes: data.classes };
  }
  if (config.model === 'mlp')
    return { kind: 'mlp', seed: config.seed, inputSize: data.inputSize, classes: data.classes };
  // A registered model (a model file): its factory fixes the shapes.
  return { kind: config.model, seed: config.seed } as unknown as ModelSpec;
}

/**
 * The data's examples against the model built for them: a model file (or a
 * resumed size) fixes its input shape and classes, and a table of another width
 * is refused here, naming the file, the model and both shapes, before any step.
 */
export function checkDataFits(
  model: Pick<Model, 'identity' | 'inputSize' | 'inputShape' | 'classes'>,
  data: Dataset,
): void {
  const labels = data.stream ? 0 : data.labels.reduce((m, y) => Math.max(m, y + 1), 0);
  if (model.inputSize === data.inputSize && labels <= model.classes) return;
  const what = data.source ?? 'the training data';
  const shape = model.inputShape ? `[batch, ${model.inputShape.join(', ')}]` : `[batch, ${model.inputSize}]`;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${what} has examples of shape [${data.count}, ${data.inputSize}] with labels of ${labels} classes, but model ${model.identity.name} reads ${shape} and has ${model.classes} classes; ` +
      (model.inputSize !== data.inputSize
        ? `give rows of ${model.inputSize} features or a model of ${data.inputSize} inputs`
        : `give labels below ${model.classes} or a model of ${labels} classes`),
    {
      file: what,
      model: model.identity.name,
      data: [data.count, data.inputSize],
      input: model.inputShape ?? [model.inputSize],
      classes: model.classes,
      labels,
    },
  );
}

/**
 * The architecture a resumed transformer was saved with, when the run does not name one: a
 * checkpoint whose model_spec has no `arch` is classic (saved before GPT-2's architecture, when
 * --text trained the classic model), so it resumes as what it is rather than as --text's new default.
 */
export function withResumedArch(
  modelOptions: Record<string, unknown> | undefined,
  resume: Pick<TrainingCheckpoint, 'model' | 'extra'> | undefined,
): Record<string, unknown> | undefined {
  if (!resume || resume.model !== 'transformer' || modelOptions?.arch !== undefined || !resume.extra.model_spec)
    return modelOptions;
  try {
    const saved = JSON.parse(resume.extra.model_spec) as { arch?: unknown };
    return { ...modelOptions, arch: saved.arch ?? 'classic' };
  } catch {
    return modelOptions;
  }
}

/**
 * A text model's ids mean its tokenizer's tokens: a checkpoint resumes only on
 * a text of the same tokenizer and vocabulary (a text of the same size but
 * other characters would fit every tensor and silently retrain every embedding).
 */
export function checkVocabulary(c: TrainingCheckpoint, data: Pick<Dataset, 'vocabulary'>, file: string): void {
  const saved = c.extra.vocabulary;
  if (saved === data.vocabulary) return;
  if (saved === undefined) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} records no text vocabulary (it was not trained with --text), but this run trains on a text with ${describeRecord(data.vocabulary!)}; start without --resume.`,
      { file },
    );
  }
  if (data.vocabulary === undefined) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} is a text model (${describeRecord(saved)}); resume it with the --text it was trained on.`,
      { file },
    );
  }
  const why =
    recordName(saved) === recordName(data.vocabulary)
      ? 'its token ids would mean other characters; resume with the text it was trained on'
      : `its token ids would mean other tokens; resume with --tokenizer ${recordName(saved)}`;
  throw new RingtrainError(
    ErrorCode.BadCheckpoint,
    `${file} was trained with ${describeRecord(saved)}, but this run tokenizes its --text with ${describeRecord(data.vocabulary)}: ${why}.`,
    { file },
  );
}

/**
 * The tokenizer a --text run uses: the one asked for, else a resumed
 * checkpoint's (so a resume needs no --tokenizer), else undefined (the text's
 * own characters or bytes). Asking for another than the checkpoint's is
 * refused here, naming both, before the text is tokenized.
 */
export function resumeTokenizer(
  given: TokenizerName | undefined,
  resume: Pick<TrainingCheckpoint, 'extra'> | undefined,
  file = 'the checkpoint',
): TokenizerName | undefined {
  const record = resume?.extra.vocabulary;
  if (record === undefined) return given;
  const saved = recordName(record);
  if (given !== undefined && given !== saved) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} was trained with ${describeRecord(record)}, but this run asks for --tokenizer ${given}: its token ids would mean other tokens; drop --tokenizer (a resume takes the checkpoint's) or start without --resume.`,
      { file, saved, given },
    );
  }
  return saved;
}

/**
 * A classifier trained on class names (a CSV label column of names, ids in
 * their sorted order) resumes only on data with the same names: another set
 * would renumber the classes and every output would mean another class.
 */
export function checkClassNames(c: TrainingCheckpoint, data: Pick<Dataset, 'classNames'>, file: string): void {
  const saved = c.extra.class_names;
  const ours = data.classNames ? JSON.stringify(data.classNames) : undefined;
  if (saved === ours) return;
  const list = (json: string | undefined) =>
    json === undefined ? 'class numbers' : `the classes ${(JSON.parse(json) as string[]).join(', ')}`;
  throw new RingtrainError(
    ErrorCode.BadCheckpoint,
    `${file} was trained on ${list(saved)}, but this data has ${list(ours)}: class ids would mean other classes; resume with the table it was trained on, or start without --resume.`,
    { file },
  );
}

/** Loads a checkpoint's weights and optimizer state, after checking they belong to this model, its data's vocabulary and this optimizer. */
export async function restore(
  model: Model,
  optimizer: Optimizer,
  c: TrainingCheckpoint,
  config: Pick<LocalTrainConfig, 'model' | 'optimizer'>,
  name: string,
  data: Pick<Dataset, 'vocabulary' | 'classNames'> = {},
): Promise<void> {
  // Kind, then options, then tensor by tensor: the first thing that differs is the one named.
  checkCheckpointKind(c, config, name);
  checkModelOptions(c, model, name);
  checkVocabulary(c, data, name);
  checkClassNames(c, data, name);
  const flat = flatParamsFor(
    c,
    { model: config.model, optimizer: config.optimizer, layout: model.layout, flatLength: model.flatLength },
    name,
  );
  const fresh = await optimizer.exportState();
  checkOptimizerState(c, Object.fromEntries(Object.entries(fresh).map(([k, v]) => [k, v.length])), name);
  model.writeParams(flat);
  optimizer.importState(c.optimizerState);
}
