/** Every op, in one list: importing this module registers them all (the oracle-coverage test walks the registry). */
export { linearOp, type LinearAttrs } from './linear.ts';
export { matmulOp } from './matmul.ts';
export { reluOp, tanhOp, geluTanhOp } from './activation.ts';
export { conv2dOp, type Conv2dAttrs } from './conv2d.ts';
export { maxPool2dOp, type MaxPoolAttrs } from './maxpool.ts';
export { reshapeOp, type ReshapeAttrs } from './reshape.ts';
export { addOp } from './add.ts';
// The transformer's and users' ops (kernels and references in src/gpu/kernels).
export { geluOp } from './gelu.ts';
export { layerNormOp, type LayerNormAttrs } from './layernorm.ts';
export { softmaxOp } from './softmax.ts';
export { crossEntropyOp } from './cross-entropy.ts';
export { embeddingOp } from './embedding.ts';
export { attentionOp, type AttentionAttrs } from './attention.ts';
export { bmmOp, type BmmAttrs } from './bmm.ts';
export { addBroadcastOp, mulOp, scaleOp, type AddAttrs, type ScaleAttrs } from './broadcast.ts';
export { permuteOp, sliceOp, concatOp, type PermuteAttrs, type SliceAttrs, type ConcatAttrs } from './permute.ts';
export { dropoutOp, type DropoutAttrs } from './dropout.ts';
export { mseOp } from './mse.ts';
