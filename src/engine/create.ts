/**
 * createModel: the one way to build a model, whatever it is made of.
 *
 *   createModel(gpu, new Net(), { inputShape: [784], classes: 10 })   // an nn.Module of your own
 *   createModel(gpu, factory, { options: { width: 128 } })            // a model file's factory
 *   createModel(gpu, 'mlp', { hidden: [128], seed: 3 })                // a built-in: 'mlp', 'cnn' or 'transformer'
 *
 * The CLI's spec form, createModel(gpu, { kind: 'mlp', … }), builds the same
 * models from a job's settings, and a name registered by `--model ./file.ts`
 * builds like a built-in one.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Module } from '../nn/module.ts';
import { Cnn } from './cnn.ts';
import {
  type ModelDefinition,
  type ModelFactory,
  modelFromDefinition,
  modelFromFactory,
  registeredModel,
} from './define.ts';
import type { GraphModel, ModelMaking } from './graph-model.ts';
import { Mlp } from './mlp.ts';
import { Transformer } from './transformer.ts';
import type { CnnSpec, MlpSpec, Model, ModelSpec, TransformerSpec } from './model.ts';

/** What createModel needs beside a module: the module alone does not say what it reads or how many classes it scores. */
export interface ModuleModelOptions {
  /** One sample's shape, e.g. [784], [1, 28, 28], or [32] token ids. Required. */
  inputShape: number[];
  /** The output's last dimension. Required. */
  classes: number;
  /** Seed of the initial weights (default 1). */
  seed?: number;
  /** 'cross-entropy' (default) or 'cross-entropy-ignore' (targets −1 ignored). */
  loss?: ModelDefinition['loss'];
  /** 'u32' when the input holds indices (token ids). Default 'f32'. */
  inputDType?: ModelDefinition['inputDType'];
  /** The model's name in checkpoints and for peers that must build the same one (default: the module's class name). */
  name?: string;
}

export interface FactoryModelOptions<O extends object> {
  /** The factory's options (a model file's `--model-options`). */
  options?: O;
  /** Seed of the initial weights (default 1). */
  seed?: number;
  /** The model's name in checkpoints and for peers (default: the factory function's name). */
  name?: string;
}

export type BuiltInModelOptions<S extends ModelSpec> = Omit<S, 'kind'>;

export function createModel(gpu: Gpu, module: Module, options: ModuleModelOptions): GraphModel;
export function createModel<O extends object>(
  gpu: Gpu,
  factory: ModelFactory<O>,
  options?: FactoryModelOptions<O>,
): GraphModel;
export function createModel(gpu: Gpu, preset: 'mlp', options?: BuiltInModelOptions<MlpSpec>): Model;
export function createModel(gpu: Gpu, preset: 'cnn', options?: BuiltInModelOptions<CnnSpec>): Model;
export function createModel(gpu: Gpu, preset: 'transformer', options?: BuiltInModelOptions<TransformerSpec>): Model;
/** The spec form jobs and the CLI build from; `kind` may also be a name `--model ./file.ts` registered (the CLI's, not typed here). */
export function createModel(gpu: Gpu, spec: ModelSpec): Model;
export function createModel(gpu: Gpu, what: unknown, options?: object): Model {
  if (what instanceof Module) return fromModule(gpu, what, options as ModuleModelOptions | undefined);
  if (typeof what === 'function' && what.prototype instanceof Module) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `createModel(gpu, ${what.name}, options): ${what.name} is a module class; pass an instance, createModel(gpu, new ${what.name}(), options)`,
    );
  }
  if (typeof what === 'function')
    return fromFactory(gpu, what as ModelFactory, (options ?? {}) as FactoryModelOptions<object>);
  if (typeof what === 'string') return fromSpec(gpu, { ...(options ?? {}), kind: what } as unknown as ModelSpec);
  if (what && typeof what === 'object' && 'kind' in what) return fromSpec(gpu, what as ModelSpec);
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `createModel(gpu, what, options): what must be an nn.Module, a model factory (nn, options) => { module, inputShape, classes }, or a built-in name ('mlp', 'cnn', 'transformer'); got ${describe(what)}`,
  );
}

function describe(v: unknown): string {
  if (v === null || typeof v !== 'object') return String(v);
  return `an object (${v.constructor?.name ?? 'no class'}): a module built from another copy of ringtrain's nn is not an nn.Module here`;
}

function fromModule(gpu: Gpu, module: Module, o: ModuleModelOptions | undefined): GraphModel {
  const where = `createModel(gpu, ${module.constructor.name}, options)`;
  const shape = 'pass { inputShape, classes }, e.g. createModel(gpu, new Net(), { inputShape: [784], classes: 10 })';
  if (!o || o.inputShape === undefined || o.classes === undefined) {
    const missing = ['inputShape', 'classes'].filter(
      (k) => (o as Record<string, unknown> | undefined)?.[k] === undefined,
    );
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${where}: options.${missing.join(' and options.')} missing; a module alone does not say what it reads or how many classes it scores: ${shape}`,
      { missing },
    );
  }
  const name = o.name ?? module.constructor.name;
  checkName(where, name);
  return modelFromDefinition(
    gpu,
    { module, inputShape: o.inputShape, classes: o.classes, loss: o.loss, inputDType: o.inputDType },
    { name, options: {} },
    o.seed,
    where,
    shape,
  );
}

function fromFactory(gpu: Gpu, factory: ModelFactory, o: FactoryModelOptions<object>): GraphModel {
  const name = o.name ?? factory.name;
  checkName('createModel(gpu, factory, options)', name);
  return modelFromFactory(gpu, factory, {
    name,
    options: o.options as Record<string, unknown> | undefined,
    seed: o.seed,
  });
}

function checkName(where: string, name: unknown): void {
  if (typeof name !== 'string' || name.length === 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${where}: the model has no name (an anonymous class or function); pass options.name, which checkpoints and peers use to tell models apart`,
    );
  }
}

/**
 * createModel(gpu, spec) for a worker that must keep answering its server and links: the weights
 * are drawn with the event loop turning every ~100 ms (the same numbers, bit for bit), where the
 * constructor would hold the thread for all of them (GPT-2 124M: 10-40 s on a loaded CPU).
 */
export async function createModelInPieces(gpu: Gpu, spec: ModelSpec): Promise<Model> {
  const model = fromSpec(gpu, spec, { drawLater: true });
  try {
    await model.drawInitialWeights();
  } catch (err) {
    model.destroy();
    throw err;
  }
  return model;
}

function fromSpec(gpu: Gpu, spec: ModelSpec, made: ModelMaking = {}): GraphModel {
  switch (spec?.kind) {
    case 'mlp':
      return new Mlp(gpu, spec, made);
    case 'cnn':
      return new Cnn(gpu, spec, made);
    case 'transformer':
      return new Transformer(gpu, spec, made);
    default: {
      const kind = (spec as { kind?: unknown })?.kind;
      const factory = typeof kind === 'string' ? registeredModel(kind) : undefined;
      if (factory) {
        const {
          kind: name,
          seed,
          ...options
        } = spec as unknown as { kind: string; seed?: number } & Record<string, unknown>;
        return modelFromFactory(gpu, factory, { name, options, seed }, made);
      }
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `unknown model kind ${JSON.stringify(kind)}; use 'mlp', 'cnn' or 'transformer', an nn.Module, or a model factory (createModel(gpu, factory))`,
      );
    }
  }
}
