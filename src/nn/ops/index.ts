/** Every op, in one list: importing this module registers them all (the oracle-coverage test walks the registry). */
export { linearOp, type LinearAttrs } from './linear.ts';
export { matmulOp } from './matmul.ts';
export { reluOp, tanhOp, geluOp } from './activation.ts';
export { conv2dOp, type Conv2dAttrs } from './conv2d.ts';
export { maxPool2dOp, type MaxPoolAttrs } from './maxpool.ts';
export { reshapeOp, type ReshapeAttrs } from './reshape.ts';
export { addOp } from './add.ts';
