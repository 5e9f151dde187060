/**
 * `--model ./my-model.ts`: a model file is loaded and registered before any
 * training starts (src/engine/model-file.node.ts); the model then goes by its
 * registered name (`my-model@<hash of the file>`). A job records that name
 * and the layout hash, and a worker whose file builds something else is
 * refused naming both.
 *
 * A worker never loads a model file because a job names it: the job's config
 * comes from the server, and importing a file runs it. The worker's own user
 * passes the file (`ringtrain worker --model ./my-model.ts`); its name and the
 * hash of its bytes are checked against the job's before it is imported, and
 * its layout hash right after.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { checkSameModel, describeModel, isModelFile } from '../../engine/define.ts';
import { loadModelFile } from '../../engine/model-file.node.ts';
import type { JobConfig } from '../../signaling/protocol.ts';
import type { Hyperparameters, JobSettings } from '../../job/settings.ts';

export interface ModelChoice {
  /** What the trainers build: a built-in kind or the registered name. */
  model: string;
  /** For a model file: its name and layout hash. */
  identity?: { name: string; layoutHash: string };
}

export async function useModelOption(model: string, options: Record<string, unknown> = {}): Promise<ModelChoice> {
  if (!isModelFile(model)) return { model };
  const { name, factory } = await loadModelFile(model);
  return { model: name, identity: describeModel(factory, name, options) };
}

/** `--model-options '{"width":128}'`: a JSON object, or a refusal naming the flag. */
export function parseModelOptions(raw: unknown): Record<string, unknown> | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(String(raw));
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--model-options ${JSON.stringify(raw)} is not JSON (${(err as Error).message}); give an object, e.g. --model-options '{"width":128}'`,
      { option: 'modelOptions', value: raw },
    );
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--model-options must be a JSON object, e.g. '{"width":128}', got ${JSON.stringify(raw)}`,
      { option: 'modelOptions', value: raw },
    );
  }
  return v as Record<string, unknown>;
}

/** The hyperparameters a job carries for a model file (`workerModel` checks a worker's file against them). */
export function jobModelFields(choice: ModelChoice): Hyperparameters {
  return choice.identity ? { modelName: choice.identity.name, modelLayoutHash: choice.identity.layoutHash } : {};
}

/** Text from the server shown in a message: no control characters (a terminal would act on them), not too long. */
function shown(text: string): string {
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return JSON.stringify(clean.length > 200 ? `${clean.slice(0, 200)}…` : clean);
}

/**
 * The model a worker trains for a job, from the job's config and the worker's own
 * `--model` (a model file, or the built-in name). A job that trains a model file
 * needs the worker's copy of it: without one, or with a file of other bytes, the
 * worker is refused before anything is read or run.
 */
export async function workerModel(
  job: { id: string; config: Pick<JobConfig, 'model'> },
  settings: Pick<JobSettings['model'], 'modelName' | 'modelLayoutHash'>,
  given: string | undefined,
  options: Record<string, unknown> = {},
): Promise<ModelChoice> {
  const jobName = settings.modelName;
  const jobLayout = settings.modelLayoutHash;
  const fileJob = jobName !== undefined || isModelFile(job.config.model);
  if (!fileJob) {
    if (given !== undefined && given !== job.config.model) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `job ${shown(job.id)} trains the built-in model ${shown(job.config.model)}, not ${given}; drop --model (or pass --model ${job.config.model})`,
        { job: job.id, model: job.config.model, given },
      );
    }
    return { model: job.config.model };
  }
  if (jobName === undefined || jobLayout === undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${shown(job.id)} trains a model file but records no model identity (modelName, modelLayoutHash); this worker loads no file on the job's word: start the job with ringtrain run --model <file>`,
      { job: job.id },
    );
  }
  // The job's file name, for the hint only: what the job calls it is not read or run here.
  const hint = jobName.replace(/@[0-9a-f]*$/, '').replace(/[^A-Za-z0-9._-]/g, '_') || 'model';
  if (given === undefined || !isModelFile(given)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${shown(job.id)} trains the model file ${shown(jobName)} (layout hash ${shown(jobLayout)}), and a worker does not load a model file that the server names; pass your copy of it: ringtrain worker --model ./${hint}.ts …`,
      { job: job.id, expected: { name: jobName, layoutHash: jobLayout }, given: given ?? null },
    );
  }
  const { name, factory } = await loadModelFile(given, (name) => {
    if (name !== jobName) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `this peer's model file ${given} is ${name} but job ${shown(job.id)} trains ${shown(jobName)}: the names or bytes differ, so it was not loaded; pass the job's own file with --model`,
        { ours: { name }, expected: { name: jobName, layoutHash: jobLayout } },
      );
    }
  });
  // Built with the job's options: the layout hash the job records is of the model with them.
  const identity = describeModel(factory, name, options);
  checkSameModel(
    { identity: { name, options: {} }, layoutHash: identity.layoutHash },
    { name: jobName, layoutHash: jobLayout },
  );
  return { model: name, identity };
}
