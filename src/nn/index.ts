/**
 * The autodiff core and the model API. Ops, their functional forms and the
 * layers (modules named as in PyTorch) come from the op folders through
 * `./ops/index.ts`; `F` gathers the functional forms.
 */
export {
  Graph,
  Parameter,
  Tensor,
  apply,
  sizeOf,
  shapeText,
  type DType,
  type Node,
  type ParamInit,
  type Shape,
} from './tensor.ts';
export {
  defineOp,
  registeredOps,
  shapeError,
  requireF32,
  isCopy,
  type CopyStep,
  type CpuOracle,
  type Op,
  type OpPlan,
  type OutSpec,
  type PlanContext,
  type ShapeInfo,
  type Step,
} from './op.ts';
export { compilePlan, recordSteps, type ParamStore, type Plan } from './plan.ts';
export { Module, Sequential } from './module.ts';
export { type InitScheme } from './init.ts';
export { F, type Functional } from './functional.ts';
export * from './ops/index.ts';
