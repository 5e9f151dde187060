/**
 * `ringtrain`: the library, for the browser (Vite), Deno and Node.
 *
 *   import { nn, optim, data, acquireGpu, createModel, init, DistributedOptimizer } from 'ringtrain';
 *
 * This entry runs in every runtime and imports no Node-only file (`*.node.ts`);
 * Node and Deno get index.node.ts, the same with the file-system pieces
 * (checkpoint files, model files, data loaders) and an init() that brings
 * its own WebSocket and WebRTC. In the browser, register the WGSL shaders
 * before acquireGpu():
 *
 * registerShaders(import.meta.glob('/node_modules/ringtrain/shaders/*.wgsl', { query: '?raw', import: 'default', eager:
 *   true }));
 */

/** Modules, layers, functional ops (`nn.F`), symbolic tensors: the API a model factory receives. */
export * as nn from './nn/index.ts';
/** The types a model file's factory and forward are written with (the values come in its `nn` argument). */
export type { Tensor, Parameter, Shape, DType } from './nn/tensor.ts';
export type { Module } from './nn/module.ts';
/** Optimizers (SGD with momentum, AdamW) and learning-rate schedules. */
export * as optim from './lib/optim.ts';
/** Datasets, batches, sharding by rank. */
export * as data from './lib/data.ts';

// Errors and events.
export { RingtrainError, ErrorCode, isRingtrainError } from './core/errors.ts';
export { EventBus, type RingEvent, type Listener } from './core/events.ts';

// The device.
export { acquireGpu, type AcquireOptions } from './gpu/device.ts';
export { Gpu, type GpuInfo } from './gpu/gpu.ts';
export { registerShaders } from './gpu/shaders.ts';

// Models. createModel is the one way to build one: from an nn.Module, a model factory, or a
// built-in name. GraphModel is what it returns (exported as a type); the engine's other
// constructors (new GraphModel, modelFromFactory, registerModel, new Mlp/Cnn/Transformer) are
// internal: the CLI and the trainers build through them, users need not.
export {
  createModel,
  type ModuleModelOptions,
  type FactoryModelOptions,
  type BuiltInModelOptions,
} from './engine/create.ts';
export type { GraphModel } from './engine/graph-model.ts';
export { describeModel, checkSameModel, type ModelDefinition, type ModelFactory, type NnApi } from './engine/define.ts';
export type {
  Model,
  ModelSpec,
  MlpSpec,
  CnnSpec,
  TransformerSpec,
  ModelIdentity,
  ParamEntry,
  EvalResult,
} from './engine/model.ts';
export type { GradientBucket } from './engine/grad-buckets.ts';
export { trainStep } from './engine/train-step.ts';
export { predict, type Prediction, type PredictOptions } from './engine/predict.ts';
export { stateDict, loadStateDict, saveSafetensors, loadSafetensors } from './engine/weights.ts';
export { encodeSafetensors, decodeSafetensors, type NamedTensors, type Metadata } from './checkpoint/safetensors.ts';
export {
  encodeCheckpoint,
  decodeCheckpoint,
  checkpointFromFlat,
  flatParamsFor,
  type TrainingCheckpoint,
} from './checkpoint/checkpoint.ts';

// Horovod-style distributed training.
export { init, type InitOptions, type Session } from './distributed/session/session.ts';
export {
  DistributedOptimizer,
  type DistributedOptimizerOptions,
  type GradientCheck,
  type StepResult,
} from './distributed/api/optimizer.ts';
export {
  broadcastParameters,
  broadcastOptimizerState,
  averageMetrics,
  type BroadcastOptions,
} from './distributed/api/broadcast-state.ts';
export { LocalSgdOptimizer, type LocalSgdOptions } from './distributed/train/diloco.ts';
/** Elastic training for your own loop: State (commit, restore, sync), run. */
export * as elastic from './distributed/api/elastic.ts';
export {
  trainLocal,
  type LocalTrainConfig,
  type LocalTrainArgs,
  type LocalTrainResult,
} from './distributed/train/train-local.ts';
export {
  trainDistributed,
  type DistributedTrainArgs,
  type DistributedTrainConfig,
  type DistributedTrainResult,
} from './distributed/train/trainer.ts';
export { allreduce, allgather, broadcast, barrier, reducescatter, alltoall } from './collectives/index.ts';
export type { Communicator } from './comm/communicator.ts';
export { createMemoryRing } from './comm/rings.ts';
