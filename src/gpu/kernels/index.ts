/**
 * The GPU layer's own kernels: matmul, bias, the reductions, elementwise
 * vector ops, f16 packing and the optimizers. Importing this file registers
 * them (each file calls `defineKernel`); the ops' kernels live in their op
 * folders (src/nn/ops/<op>/kernel.ts) and register when those load. `KERNELS`
 * lists whatever is registered.
 */
export { KERNELS, defineKernel, warmUp, type KernelEntry } from './registry.ts';
export { checkDims, checkBindings, planEntry, accumulateConstant } from './common.ts';
export { planMatmulSteps } from './matmul-slices.ts';
export {
  planMatmul,
  matmulSplitK,
  MATMUL_TILE,
  chooseMatmulVariant,
  directFits,
  wideFits,
  blockedFits,
  adapterKind,
  MATMUL_TABLE,
  type AdapterKind,
  type ChosenMatmulVariant,
  type MatmulOptions,
  type MatmulShape,
  type MatmulVariant,
} from './matmul.ts';
export { planAddBias, planBiasGrad, planBiasGradSteps } from './bias.ts';
export { planSoftmaxXent, checkLabels, type SoftmaxXentBuffers } from './softmax-xent.ts';
export { planSum } from './reduce.ts';
export { planColumnSum, planSumTree, gpuScratch, type Scratch, type ColumnSumShape } from './reduce-rows.ts';
export { planAdd, planAxpy, planScale } from './elementwise.ts';
export { planAccumulate, type AccumulateBuffers } from './accumulate.ts';
export { planPackF16, planUnpackF16, packedWords } from './f16.ts';
export { planLossScale } from './loss-scale.ts';
export { planOptimizerUpdate, optimizerFields, defineOptimizerKernel } from './optimizers.ts';
