/**
 * Every kernel, in one explicit list: the shader file each uses and its entry
 * points. `warmUp` compiles them all; tests use the list to check that every
 * kernel has a shader and an oracle. Kernel files added by other modules
 * (conv, pool) append their own entries here.
 */
import type { Gpu } from '../gpu.ts';

export interface KernelEntry {
  /** `shaders/<shader>.wgsl` */
  shader: string;
  entryPoints: string[];
  /** Override constants the kernel is compiled with by default. */
  constants?: Record<string, number>;
}

export const KERNELS: Record<string, KernelEntry> = {
  matmul: { shader: 'matmul', entryPoints: ['main'] },
  matmulDirect: { shader: 'matmul_direct', entryPoints: ['main'] },
  matmulBlocked: { shader: 'matmul_tiled_blocked', entryPoints: ['main'] },
  matmulWide: { shader: 'matmul_wide', entryPoints: ['main'] },
  bias: { shader: 'bias', entryPoints: ['add_bias', 'bias_grad'] },
  activation: { shader: 'activation', entryPoints: ['relu_forward', 'relu_backward', 'tanh_forward', 'tanh_backward', 'gelu_forward', 'gelu_backward'] },
  softmaxXent: { shader: 'softmax_xent', entryPoints: ['main'] },
  sum: { shader: 'reduce', entryPoints: ['main'] },
  reduceRows: { shader: 'reduce_rows', entryPoints: ['columns', 'tree'] },
  elementwise: { shader: 'elementwise', entryPoints: ['add', 'axpy'] },
  scale: { shader: 'scale', entryPoints: ['main'] },
  f16: { shader: 'f16', entryPoints: ['pack', 'unpack'] },
  sgd: { shader: 'sgd', entryPoints: ['main'] },
  adamw: { shader: 'adamw', entryPoints: ['main'] },
  // conv2d_forward also computes the input gradient (FLIP).
  conv2d: { shader: 'conv2d_forward', entryPoints: ['main'] },
  conv2dFlip: { shader: 'conv2d_forward', entryPoints: ['main'], constants: { FLIP: 1, HAS_BIAS: 0 } },
  conv2dWeightGrad: { shader: 'conv2d_backward_weight', entryPoints: ['main'] },
  maxpool: { shader: 'maxpool_forward', entryPoints: ['main'] },
  maxpoolBackward: { shader: 'maxpool_backward', entryPoints: ['main'] },
  // The neural-network and tensor kernels behind src/nn/ops (references: nn_reference.ts, tensor_reference.ts).
  layerNorm: { shader: 'layernorm', entryPoints: ['forward', 'backward_input', 'backward_params'] },
  geluErf: { shader: 'gelu', entryPoints: ['forward', 'backward'] },
  softmax: { shader: 'softmax', entryPoints: ['forward', 'backward'] },
  crossEntropy: { shader: 'cross_entropy', entryPoints: ['rows', 'total', 'scale'] },
  embedding: { shader: 'embedding', entryPoints: ['forward', 'backward'] },
  attention: { shader: 'attention', entryPoints: ['forward', 'backward_q', 'backward_kv'] },
  bmm: { shader: 'bmm', entryPoints: ['main'] },
  dropout: { shader: 'dropout', entryPoints: ['advance', 'forward', 'backward'] },
  broadcast: { shader: 'broadcast', entryPoints: ['add', 'mul', 'scale', 'reduce'] },
  mse: { shader: 'mse', entryPoints: ['forward', 'backward'] },
  strided: { shader: 'strided', entryPoints: ['copy', 'fill'] },
};

/** Compiles every registered kernel's pipelines (surfacing WGSL errors early). */
export function warmUp(gpu: Gpu): void {
  for (const k of Object.values(KERNELS)) for (const entryPoint of k.entryPoints) gpu.pipeline(k.shader, { entryPoint, constants: k.constants });
}

export { checkDims, checkBindings, planEntry, accumulateConstant } from './common.ts';
export { planMatmul, planMatmulSteps, matmulSplitK, MATMUL_TILE, chooseMatmulVariant, directFits, wideFits, blockedFits, adapterKind, MATMUL_TABLE, type AdapterKind, type ChosenMatmulVariant, type MatmulOptions, type MatmulShape, type MatmulVariant } from './matmul.ts';
export { planAddBias, planBiasGrad, planBiasGradSteps } from './bias.ts';
export { planActivationForward, planActivationBackward, checkActivation, ACTIVATIONS, type Activation } from './activation.ts';
export { planSoftmaxXent, checkLabels, type SoftmaxXentBuffers } from './softmax-xent.ts';
export { planSum } from './reduce.ts';
export { planColumnSum, planSumTree, gpuScratch, type Scratch, type ColumnSumShape } from './reduce-rows.ts';
export { planAdd, planAxpy, planScale } from './elementwise.ts';
export { planPackF16, planUnpackF16, packedWords } from './f16.ts';
export { planSgd, planAdamw, sgdFields, adamwFields, type SgdHyper, type AdamwHyper } from './optimizers.ts';
export { planConv2dForward, planConv2dBackwardInput, planConv2dBackwardWeight, convOutSize, convSizes, samePadding, type ConvShape } from './conv2d.ts';
export { planLayerNormForward, planLayerNormBackward, LAYER_NORM_EPS, type LayerNormShape } from './layernorm.ts';
export { planGeluForward, planGeluBackward } from './gelu.ts';
export { planSoftmaxForward, planSoftmaxBackward } from './softmax.ts';
export { planCrossEntropy, checkTargets, IGNORE_TARGET, type CrossEntropyBuffers } from './cross-entropy.ts';
export { planEmbeddingForward, planEmbeddingBackward, checkIds, type EmbeddingShape } from './embedding.ts';
export { planAttentionForward, planAttentionBackward, attentionSizes, type AttentionShape } from './attention.ts';
export { planBmm, type BmmShape } from './bmm.ts';
export { planDropoutAdvance, planDropoutForward, planDropoutBackward, type DropoutOptions } from './dropout.ts';
export { planBroadcastBinary, planBroadcastReduce, planScaleTo, broadcastShape } from './broadcast.ts';
export { planMseLoss, planMseGrad } from './mse.ts';
export { planTranspose, planWindowCopy, planConcat, planFill, inversePermutation, permutedShape } from './strided.ts';
export { planMaxPoolForward, planMaxPoolBackward, poolSizes, NO_WINNER, type PoolShape } from './maxpool.ts';
