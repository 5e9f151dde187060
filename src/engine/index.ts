/** The single-peer engine: models (any nn Module as a GraphModel over flat buffers, the built-in ones, users' factories), optimizers, training steps. */
export { createModel, createModelInPieces } from './create.ts';
export {
  AdamW,
  SGD,
  OPTIMIZERS,
  createOptimizer,
  resolveOptimizerSpec,
  type AdamWOptions,
  type Optimizer,
  type OptimizerSpec,
  type SgdOptions,
} from './optimizer.ts';
export { Mlp, MLP_DEFAULTS, resolveMlpSpec } from './mlp.ts';
export { Cnn, CnnModule, CNN_DEFAULTS, cnnSpec } from './cnn.ts';
export { MlpModule } from './mlp.ts';
export { Transformer, TransformerModule, TRANSFORMER_DEFAULTS, resolveTransformerSpec } from './transformer.ts';
export { GraphModel, layoutOf, type GraphModelOptions } from './graph-model.ts';
export {
  PARAM_ALIGN,
  type CnnSpec,
  type EvalResult,
  type MlpSpec,
  type Model,
  type ModelKind,
  type ModelSpec,
  type ModelIdentity,
  type ParamEntry,
} from './model.ts';
export { seededNormal, seededUniform, initTensor, type InitKind } from './random.ts';
export { recordDeferredLoss, trainStep, trainStepDeferred } from './train-step.ts';
export { passesOf, passWeights, useMicroBatch } from './micro-batch.ts';
export {
  bucketBytesFor,
  DEFAULT_BUCKET_BYTES,
  MAX_BUCKETS,
  planBuckets,
  type BucketRange,
  type GradientBucket,
} from './grad-buckets.ts';
export {
  registerModel,
  registeredModel,
  modelFromFactory,
  checkSameModel,
  describeModel,
  isModelFile,
  type ModelDefinition,
  type ModelFactory,
  type NnApi,
} from './define.ts';
