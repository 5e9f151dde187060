/**
 * Models users bring. A model factory receives the model API (`nn`: Module,
 * Linear, LayerNorm, F, …) and the model's options, and returns what to build:
 *
 *   export default function model(nn, options) {
 *     class Net extends nn.Module {
 *       fc1 = new nn.Linear(784, 128);
 *       fc2 = new nn.Linear(128, 10);
 *       forward(x) { return this.fc2.call(nn.F.gelu(this.fc1.call(x))); }
 *     }
 *     return { module: new Net(), inputShape: [784], classes: 10 };
 *   }
 *
 * The API is passed in rather than imported so that a file anywhere (outside
 * the repository, in a browser bundle) builds on the same classes ringtrain
 * checks against. Factories are registered by name; `createModel` builds a
 * registered name like a built-in one. Two peers train the same model only
 * when their names and layout hashes agree (`checkSameModel`).
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import * as nn from '../nn/index.ts';
import { crossEntropy, crossEntropyIgnore, type Loss } from '../nn/loss.ts';
import { layoutHash } from '../checkpoint/checkpoint.ts';
import { GraphModel, layoutOf, type ModelMaking } from './graph-model.ts';
import type { Model } from './model.ts';

export type NnApi = typeof nn;

export interface ModelDefinition {
  module: nn.Module;
  /** One sample's shape, e.g. [784] or [1, 28, 28] or [32] (token ids). */
  inputShape: number[];
  /** The output's last dimension. */
  classes: number;
  /** 'u32' when the input holds indices (token ids). Default 'f32'. */
  inputDType?: 'f32' | 'u32';
  /** 'cross-entropy' (one class per output row, default) or 'cross-entropy-ignore' (targets −1 ignored). */
  loss?: 'cross-entropy' | 'cross-entropy-ignore';
}

/**
 * What a model file exports. `O` types the options the factory reads
 * (`ModelFactory<{ width?: number }>`); they come from `--model-options` or the
 * caller, so a factory checks their values rather than trusting them.
 */
export type ModelFactory<O extends object = Record<string, unknown>> = (api: NnApi, options: O) => ModelDefinition;

const LOSSES: Record<string, Loss> = { 'cross-entropy': crossEntropy, 'cross-entropy-ignore': crossEntropyIgnore };
const BUILT_IN = new Set(['mlp', 'cnn', 'transformer']);
const registry = new Map<string, ModelFactory>();

/** True when a `--model` value names a file (a path or a .ts/.js name) rather than a built-in or registered model. */
export function isModelFile(model: string): boolean {
  return /\.(m?[jt]s)$/.test(model) || model.includes('/') || model.includes('\\');
}

/** A factory's model identity and layout hash, without a GPU (what a job records so that every peer builds the same model). */
export function describeModel(
  factory: ModelFactory,
  name: string,
  options: Record<string, unknown> = {},
): { name: string; layoutHash: string } {
  const definition = callFactory(factory, name, options);
  checkDefinition(`model ${name}`, definition);
  definition.module.nameTree();
  return { name, layoutHash: layoutHash(layoutOf(definition.module.namedParameters()).layout) };
}

/** Makes `name` a model `createModel` can build. Names of built-in models are refused. */
export function registerModel<O extends object>(name: string, factory: ModelFactory<O>): void {
  if (typeof name !== 'string' || name.length === 0 || BUILT_IN.has(name)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot register a model named ${JSON.stringify(name)}: pick a non-empty name other than ${[...BUILT_IN].join(', ')}`,
      { name },
    );
  }
  if (typeof factory !== 'function')
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `registerModel('${name}'): the factory must be a function (nn, options) => ({ module, inputShape, classes })`,
      { name },
    );
  // Options arrive as untyped JSON whatever O says; the registry keeps the untyped signature.
  registry.set(name, factory as unknown as ModelFactory);
}

export function registeredModel(name: string): ModelFactory | undefined {
  return registry.get(name);
}

const FACTORY_SHAPE = 'a model factory returns { module, inputShape, classes } (module: an nn.Module)';

function checkDefinition(where: string, d: ModelDefinition, shape = FACTORY_SHAPE): void {
  const bad = (what: string) => new RingtrainError(ErrorCode.InvalidArgument, `${where}: ${what}; ${shape}`, { where });
  if (!d || typeof d !== 'object') throw bad(`it returned ${String(d)}`);
  if (!(d.module instanceof nn.Module))
    throw bad('module is not an nn.Module (build it from the nn the factory receives)');
  if (
    !Array.isArray(d.inputShape) ||
    d.inputShape.length === 0 ||
    !d.inputShape.every((v) => Number.isInteger(v) && v > 0)
  )
    throw bad(`inputShape must be positive integers, got ${JSON.stringify(d.inputShape)}`);
  if (!Number.isInteger(d.classes) || d.classes < 1)
    throw bad(`classes must be a positive integer, got ${JSON.stringify(d.classes)}`);
  if (d.loss !== undefined && !(d.loss in LOSSES))
    throw bad(`loss must be one of ${Object.keys(LOSSES).join(', ')}, got ${JSON.stringify(d.loss)}`);
  if (d.inputDType !== undefined && d.inputDType !== 'f32' && d.inputDType !== 'u32')
    throw bad(`inputDType must be 'f32' or 'u32', got ${JSON.stringify(d.inputDType)}`);
}

/** Builds a model from a factory: the identity is `name` and the options; parameters are drawn from `seed`. */
export function modelFromFactory(
  gpu: Gpu,
  factory: ModelFactory,
  o: { name: string; options?: Record<string, unknown>; seed?: number },
  made: ModelMaking = {},
): GraphModel {
  const options = { ...(o.options ?? {}) };
  return modelFromDefinition(
    gpu,
    callFactory(factory, o.name, options),
    { name: o.name, options },
    o.seed,
    `model ${o.name}`,
    FACTORY_SHAPE,
    made,
  );
}

/**
 * Runs a factory on a copy of `options` and refuses options it never looked at: a misspelt
 * `--model-options` key would otherwise build the default model without a word.
 */
function callFactory(factory: ModelFactory, name: string, options: Record<string, unknown>): ModelDefinition {
  const read = new Set<string>();
  const note = (key: string | symbol) => typeof key === 'string' && read.add(key);
  const tracked = new Proxy(
    { ...options },
    {
      get: (target, key, receiver) => (note(key), Reflect.get(target, key, receiver)),
      has: (target, key) => (note(key), Reflect.has(target, key)),
      getOwnPropertyDescriptor: (target, key) => (note(key), Reflect.getOwnPropertyDescriptor(target, key)),
    },
  );
  const definition = factory(nn, tracked);
  const unread = Object.keys(options).filter((k) => !read.has(k));
  if (unread.length > 0) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `model ${name} never read the option${unread.length > 1 ? 's' : ''} ${unread.map((k) => JSON.stringify(k)).join(', ')}` +
        (read.size > 0
          ? ` (it read ${[...read].map((k) => JSON.stringify(k)).join(', ')})`
          : ' (it reads no options)') +
        `: check the spelling in --model-options or drop ${unread.length > 1 ? 'them' : 'it'}`,
      { model: name, unread, read: [...read] },
    );
  }
  return definition;
}

/** Builds a model from what a factory returns (or createModel was given with a module), once checked; `where` names it in errors. */
export function modelFromDefinition(
  gpu: Gpu,
  definition: ModelDefinition,
  identity: { name: string; options: Record<string, unknown> },
  seed: number | undefined,
  where: string,
  shape = FACTORY_SHAPE,
  made: ModelMaking = {},
): GraphModel {
  checkDefinition(where, definition, shape);
  return new GraphModel(gpu, {
    identity,
    module: definition.module,
    inputShape: definition.inputShape,
    inputDType: definition.inputDType,
    classes: definition.classes,
    seed: seed ?? 1,
    loss: LOSSES[definition.loss ?? 'cross-entropy'],
    ...made,
  });
}

/** Refuses a model that is not the one a job (or a checkpoint) expects, naming both. */
export function checkSameModel(
  model: Pick<Model, 'identity' | 'layoutHash'>,
  expected: { name: string; layoutHash: string },
  whose = "the job's",
): void {
  if (model.identity.name !== expected.name || model.layoutHash !== expected.layoutHash) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `this peer's model is ${model.identity.name} (layout hash ${model.layoutHash}) but ${whose} is ${expected.name} (layout hash ${expected.layoutHash}); every peer must build the same model: use the same model file and options`,
      { ours: { name: model.identity.name, layoutHash: model.layoutHash }, expected },
    );
  }
}
