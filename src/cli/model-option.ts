/**
 * `--model ./my-model.ts`: a model file is loaded and registered before any
 * training starts (src/engine/model-file.node.ts); the model then goes by its
 * registered name (`my-model@<hash of the file>`). A job records that name
 * and the layout hash, and a worker whose file builds something else is
 * refused naming both.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { checkSameModel, describeModel, isModelFile } from '../engine/define.ts';
import { loadModelFile } from '../engine/model-file.node.ts';

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
    throw new RingtrainError(ErrorCode.InvalidArgument, `--model-options ${JSON.stringify(raw)} is not JSON (${(err as Error).message}); give an object, e.g. --model-options '{"width":128}'`, { option: 'modelOptions', value: raw });
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--model-options must be a JSON object, e.g. '{"width":128}', got ${JSON.stringify(raw)}`, { option: 'modelOptions', value: raw });
  }
  return v as Record<string, unknown>;
}

/** The hyperparameters a job carries for a model file (see `checkJobModel`). */
export function jobModelFields(choice: ModelChoice): Record<string, string> {
  return choice.identity ? { modelName: choice.identity.name, modelLayoutHash: choice.identity.layoutHash } : {};
}

/** A worker's model file against the job's: same name (same bytes) and same layout hash, or a clear refusal. */
export function checkJobModel(choice: ModelChoice, hyperparameters: Record<string, unknown>): void {
  if (!choice.identity) return;
  const name = hyperparameters.modelName;
  const layoutHash = hyperparameters.modelLayoutHash;
  if (typeof name !== 'string' || typeof layoutHash !== 'string') {
    throw new RingtrainError(ErrorCode.InvalidArgument, `the job names model file ${choice.model} but records no model identity (modelName, modelLayoutHash); start it with ringtrain run --model <file>`);
  }
  checkSameModel({ identity: { name: choice.identity.name, options: {} }, layoutHash: choice.identity.layoutHash }, { name, layoutHash });
}
