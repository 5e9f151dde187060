/** The single-peer engine: models over flat buffers, optimizers, training steps. */
export { createModel } from './create.ts';
export { createOptimizer, resolveOptimizerSpec, type Optimizer, type OptimizerSpec } from './optimizer.ts';
export { Mlp, MLP_DEFAULTS, resolveMlpSpec } from './mlp.ts';
export { Cnn, CNN_DEFAULTS, cnnSpec, cnnParams, cnnShapes } from './cnn.ts';
export { FlatModel, buildLayout, type BatchIO, type LayerPlan, type ParamDecl } from './flat-model.ts';
export { PARAM_ALIGN, type CnnSpec, type EvalResult, type MlpSpec, type Model, type ModelKind, type ModelSpec, type ParamEntry } from './model.ts';
export { seededNormal, seededUniform, initTensor, type InitKind } from './random.ts';
export { recordDeferredLoss, trainStep, trainStepDeferred } from './train-step.ts';
