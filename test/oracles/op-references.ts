/**
 * The ops' f64 references (each in its op folder, src/nn/ops/<op>/reference.ts)
 * in one namespace, for the checks of the references themselves (nn-reference.test.ts).
 */
export * from '../../src/nn/ops/attention/reference.ts';
export * from '../../src/nn/ops/bmm/reference.ts';
export * from '../../src/nn/ops/broadcast/reference.ts';
export * from '../../src/nn/ops/cross-entropy/reference.ts';
export * from '../../src/nn/ops/dropout/reference.ts';
export * from '../../src/nn/ops/embedding/reference.ts';
export * from '../../src/nn/ops/gelu/reference.ts';
export * from '../../src/nn/ops/layernorm/reference.ts';
export * from '../../src/nn/ops/mse/reference.ts';
export * from '../../src/nn/ops/permute/reference.ts';
export * from '../../src/nn/ops/softmax/reference.ts';
export { sizeOfShape } from '../../src/nn/ops/strides.ts';
