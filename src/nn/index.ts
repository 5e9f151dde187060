/** The autodiff core and the model API. */
export { Graph, Parameter, Tensor, apply, sizeOf, shapeText, type DType, type Node, type ParamInit, type Shape } from './tensor.ts';
export { defineOp, registeredOps, shapeError, requireF32, isCopy, type CopyStep, type CpuOracle, type Op, type OpPlan, type OutSpec, type PlanContext, type ShapeInfo, type Step } from './op.ts';
export { compilePlan, recordSteps, type ParamStore, type Plan } from './plan.ts';
export { Module, Sequential } from './module.ts';
export { Linear, Conv2d, ReLU, Tanh, GELU, MaxPool2d, Flatten, LayerNorm, Embedding, Dropout, CausalSelfAttention, type InitScheme } from './layers.ts';
export * as F from './functional.ts';
export * from './ops/index.ts';
